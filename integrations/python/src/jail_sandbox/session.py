"""A small Python API over `jail session` / `jail exec`: start, exec, stop, the outcome.

Every command runs through the `jail` binary as an argv list (never a shell string built
here), inside one sandbox built once by `jail session start`. Nothing in this module runs a
command any other way: where jail cannot build the sandbox, cannot reach the level asked, or
the session cannot prove from inside that it is confined, the call raises and nothing runs.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import secrets
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DEFAULT_MAX_OUTPUT",
    "EXIT_JAIL_ERROR",
    "EXIT_TIMEOUT",
    "ExecResult",
    "JailError",
    "JailNotFound",
    "JailSession",
    "NotConfined",
    "Outcome",
    "SessionGone",
    "SessionStartError",
    "find_jail",
    "jail_duration",
]

EXIT_TIMEOUT = 124
"""`jail exec` exit code after its `--timeout` (SIGTERM, SIGKILL two seconds later)."""
EXIT_JAIL_ERROR = 125
"""`jail exec` exit code when the session is unknown, ended or refuses (jail's own error)."""

# A `jail exec` client is given this long past the command's own --timeout before this
# module ends it itself (jail sends SIGKILL two seconds after the SIGTERM).
_BACKSTOP_GRACE_S = 10.0
_CONTROL_TIMEOUT_S = 60.0
# After `jail exec` has exited, how long its output pipes may stay open (held by processes the
# command left running) before the call returns without what they write later.
_OUTPUT_GRACE_S = 1.0
_LEVELS = {"none": 0, "partial": 1, "full": 2}
# The level `jail session list` must show for each `--require` value jail takes. A list entry
# says only full, partial or none: `landlock` and `mount` (one layer each, which a partial
# level may or may not hold) are taken as proven only by full.
_REQUIRED_LEVEL = {"full": "full", "landlock": "full", "mount": "full", "any": "none"}

DEFAULT_MAX_OUTPUT = 16 * 1024 * 1024
"""Bytes of an exec's stdout, and of its stderr, kept by default. Past it the first and the
last half are kept with :func:`truncation_marker` between them; the rest is read and dropped
(the command is never blocked on a full pipe, and this process's memory stays bounded)."""


def truncation_marker(dropped: int) -> bytes:
    """What stands in an exec's output where `dropped` bytes were left out."""
    return f"\n[... jail_sandbox: {dropped} bytes of output truncated ...]\n".encode()

# An exec's variables are for the command, not for the `jail exec` client that carries them:
# these would steer the client itself (the dynamic loader, which session directory it
# connects to, its home and state, its locale files), so they travel on its command line
# (`--env NAME=VALUE`) instead of its environment. The others go by name (`--env NAME`),
# their values kept off the command line.
_CLIENT_VARS = frozenset(
    "HOME PATH TMPDIR SHELL USER LOGNAME container GCONV_PATH LOCPATH NLSPATH LANG LANGUAGE "
    "TZ TZDIR HOSTALIASES RES_OPTIONS LOCALDOMAIN GNUPGHOME DISPLAY WAYLAND_DISPLAY XAUTHORITY "
    "SCREENDIR STY TMUX POSIXLY_CORRECT".split()
)
_CLIENT_VAR_PREFIXES = ("LD_", "XDG_", "JAIL_", "RUST_", "GLIBC_", "MALLOC_", "LC_", "_")


# jail finds its own directories from these: where sessions are registered (XDG_RUNTIME_DIR,
# else the state directory), the --cow layers' store (XDG_STATE_HOME, else HOME), the
# profiles (XDG_CONFIG_HOME, else HOME). `jail session start` always gets this process's:
# with others, it registers the session where this process's later exec, list and stop never
# look (a session left running, with nobody to stop it).
_JAIL_DIR_VARS = ("HOME", "XDG_RUNTIME_DIR", "XDG_STATE_HOME", "XDG_CONFIG_HOME")


def _start_env(env: Mapping[str, str] | None) -> tuple[dict[str, str] | None, list[str]]:
    """The environment of `jail session start` for a session whose commands start from
    `env`, and the flags that give the commands `env`'s own values of `_JAIL_DIR_VARS`
    (`--env NAME=VALUE`, or `--env-deny NAME` where `env` has none)."""
    if env is None:
        return None, []
    run_env = dict(env)
    flags: list[str] = []
    for name in _JAIL_DIR_VARS:
        mine = os.environ.get(name)
        given = run_env.pop(name, None)
        if mine is not None:
            run_env[name] = mine
        if given is not None:
            if given != mine:
                flags.append(f"--env={name}={given}")
        elif mine is not None:
            flags.append(f"--env-deny={name}")
    return run_env, flags


def _client_var(name: str) -> bool:
    return name in _CLIENT_VARS or name.startswith(_CLIENT_VAR_PREFIXES)


class JailError(Exception):
    """Base class: jail could not give the confinement asked for. Nothing ran unconfined."""


class JailNotFound(JailError):
    """No usable `jail` binary."""


class SessionStartError(JailError):
    """`jail session start` refused (a bad flag or path, `--require` not met, ...)."""

    def __init__(self, message: str, *, exit_code: int | None = None, stderr: str = "") -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.stderr = stderr


class NotConfined(JailError):
    """`jail status`, run inside the session, did not confirm confinement (exit 0), or the
    session's execs are not isolated from one another (`exit_code` None)."""

    def __init__(self, message: str, *, exit_code: int | None, output: str) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.output = output


class SessionGone(JailError):
    """The session is not there (ended, stopped, or its supervisor died)."""


def find_jail(jail: str | os.PathLike[str] | None = None) -> str:
    """The absolute path of the jail binary: `jail`, else `$JAIL_BIN`, else `jail` on PATH.

    On PATH, only its absolute directories count: a relative one (`.`, `bin`, an empty entry)
    names the current directory's, often the very project a session lets a command write."""
    candidate = os.fspath(jail) if jail is not None else os.environ.get("JAIL_BIN")
    if candidate is None:
        candidate = _which("jail")
        if candidate is None:
            raise JailNotFound("no `jail` binary: pass jail=..., set JAIL_BIN or put it on PATH")
    elif os.sep not in candidate:
        found = _which(candidate)
        if found is None:
            raise JailNotFound(f"no `{candidate}` in PATH's absolute directories")
        candidate = found
    path = os.path.abspath(candidate)
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise JailNotFound(f"{path} is not an executable file")
    return path


def _which(name: str) -> str | None:
    dirs = [d for d in os.environ.get("PATH", os.defpath).split(os.pathsep) if os.path.isabs(d)]
    return shutil.which(name, path=os.pathsep.join(dirs)) if dirs else None


def jail_duration(seconds: float) -> str:
    """A duration as jail's flags take it, rounded up to the millisecond (at least 1 ms)."""
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"a timeout must be a positive number of seconds, not {seconds!r}")
    return f"{max(1, math.ceil(seconds * 1000))}ms"


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


@dataclass
class ExecResult:
    """What one `jail exec` returned: the command's exit code and its output."""

    argv: list[str]
    exit_code: int
    stdout: bytes
    stderr: bytes
    timed_out: bool = False
    """The command's `--timeout` ended it (`jail exec` exited 124 after the timeout passed)."""
    output_left_open: bool = False
    """Processes the command left running still held its stdout or stderr when it exited:
    what they write later is not in `stdout`/`stderr` (the call returned once the command
    itself had exited and a short grace had passed)."""
    stdout_truncated: int = 0
    """Bytes of stdout left out past `max_output` (their place is marked in `stdout`)."""
    stderr_truncated: int = 0
    """Bytes of stderr left out past `max_output` (their place is marked in `stderr`)."""
    output_overflowed: bool = False
    """`end_on_overflow` was asked and a stream passed `max_output`: the command was ended."""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    @property
    def truncated(self) -> bool:
        """Some of the output is not here (`max_output` was passed)."""
        return bool(self.stdout_truncated or self.stderr_truncated)

    @property
    def stdout_text(self) -> str:
        return _text(self.stdout)

    @property
    def stderr_text(self) -> str:
        return _text(self.stderr)


@dataclass
class Outcome:
    """How a session ended: what `jail session stop NAME --json` printed.

    `cow_run` is the run whose `--cow` layers wait for review (`jail diff ID`,
    `jail apply ID`), None when the session changed nothing there; `report` is the run
    report, whose `execs` say which exec changed what."""

    name: str
    status: str
    exit_code: int
    level: str
    gaps: list[str]
    report: dict[str, Any]
    cow_run: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def cow_run_ids(self) -> list[str]:
        """`[cow_run]`, or `[]` when nothing waits for review."""
        return [self.cow_run] if self.cow_run is not None else []

    @property
    def execs(self) -> list[dict[str, Any]]:
        """The report's execs: each `jail exec`'s `command`, `cwd`, `started_ms`, `ended_ms`,
        `exit_code`, `wrote` (paths under the `--cow` roots changed while it ran) and `alone`."""
        section = self.report.get("execs")
        return list(section.get("items", [])) if isinstance(section, dict) else []

    @classmethod
    def parse(cls, name: str, raw: Any) -> Outcome:
        """The outcome from `session stop --json`'s document; :class:`JailError` when it is not
        one this package understands (a jail older than `cow_run` and `report` in it)."""
        if not isinstance(raw, dict):
            raise JailError(f"jail session stop {name} printed no outcome")
        missing = [k for k in ("status", "exit_code", "level", "cow_run", "report") if k not in raw]
        if missing:
            raise JailError(
                f"jail session stop {name} --json has no {', '.join(missing)}: this jail is "
                "too old for jail_sandbox (it needs the outcome's cow_run and report)"
            )
        cow_run, report = raw["cow_run"], raw["report"]
        if cow_run is not None and (not isinstance(cow_run, str) or not cow_run):
            raise JailError(f"jail session stop {name}: cow_run is not a run id: {cow_run!r}")
        if not isinstance(report, dict):
            raise JailError(f"jail session stop {name}: the outcome carries no run report")
        exit_code = raw["exit_code"]
        if not isinstance(exit_code, int) or isinstance(exit_code, bool):
            raise JailError(f"jail session stop {name}: exit_code {exit_code!r}")
        return cls(
            name=name,
            status=str(raw["status"]),
            exit_code=exit_code,
            level=str(raw["level"]),
            gaps=[str(g) for g in raw.get("gaps") or []],
            report=report,
            cow_run=cow_run,
            raw=raw,
        )


class _ControlTimeout(JailError):
    """A control command (`session start`, `list`, `stop`, `--dry-run`) did not answer."""


def _run_control(argv: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
    timeout = kwargs.pop("timeout", _CONTROL_TIMEOUT_S)
    try:
        return subprocess.run(
            list(argv),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout,
            check=False,
            **kwargs,
        )
    except FileNotFoundError as e:
        raise JailNotFound(str(e)) from e
    except subprocess.TimeoutExpired as e:
        raise _ControlTimeout(
            f"jail {' '.join(list(argv)[1:3])} did not answer in {timeout:g} s"
        ) from e


class JailSession:
    """One `jail session`: a sandbox built once, every command started into it.

    Use :meth:`start` (or :meth:`attach` for a session another process started), then
    :meth:`exec` / :meth:`aexec`, then :meth:`stop`. A context manager stops it on exit.
    """

    def __init__(
        self,
        name: str,
        *,
        jail: str,
        cwd: str,
        args: Sequence[str] = (),
    ) -> None:
        self.name = name
        self.jail = jail
        self.cwd = cwd
        self.args = list(args)
        self.outcome: Outcome | None = None
        self.verified_status: str | None = None

    # -- start ---------------------------------------------------------------------------

    @staticmethod
    def build_args(
        *,
        ro: Iterable[str | os.PathLike[str]] = (),
        rw: Iterable[str | os.PathLike[str]] = (),
        cow: Iterable[str | os.PathLike[str]] = (),
        profile: str | None = None,
        require: str | None = "full",
        timeout: float | str | None = None,
        idle_timeout: float | str | None = None,
        report: str | os.PathLike[str] | None = None,
        extra_args: Iterable[str] = (),
    ) -> list[str]:
        """The flags of `jail session start` (after `--name`) for these settings."""
        args: list[str] = []
        if profile is not None:
            args += ["--profile", profile]
        for flag, paths in (("--ro", ro), ("--rw", rw), ("--cow", cow)):
            for p in paths:
                args += [flag, os.path.abspath(os.fspath(p))]
        if require is not None:
            args += ["--require", require]
        if timeout is not None:
            args += ["--timeout", timeout if isinstance(timeout, str) else jail_duration(timeout)]
        if idle_timeout is not None:
            args += [
                "--idle-timeout",
                idle_timeout if isinstance(idle_timeout, str) else jail_duration(idle_timeout),
            ]
        if report is not None:
            args += ["--report", os.path.abspath(os.fspath(report))]
        extra = list(extra_args)
        if any(not isinstance(a, str) for a in extra):
            raise TypeError("extra_args must be strings")
        return args + extra

    @classmethod
    def start(
        cls,
        *,
        name: str | None = None,
        cwd: str | os.PathLike[str] | None = None,
        ro: Iterable[str | os.PathLike[str]] = (),
        rw: Iterable[str | os.PathLike[str]] = (),
        cow: Iterable[str | os.PathLike[str]] = (),
        profile: str | None = None,
        require: str | None = "full",
        timeout: float | str | None = None,
        idle_timeout: float | str | None = None,
        report: str | os.PathLike[str] | None = None,
        extra_args: Iterable[str] = (),
        env: Mapping[str, str] | None = None,
        jail: str | os.PathLike[str] | None = None,
        verify: bool = True,
    ) -> JailSession:
        """Start a session and return once it is ready and (with `verify`) proven confined.

        `ro`/`rw`/`cow` and the rest map to jail's flags of the same names; `require` is
        `full` unless asked otherwise (`None` leaves it to jail's default, which runs with
        what the machine offers and names the gaps). `env` is the environment the session's
        commands start from (jail still removes secrets); the caller's by default.

        Raises :class:`JailNotFound`, :class:`SessionStartError` (nothing was started), or
        :class:`NotConfined` (the session was stopped again: `jail status` inside did not
        exit 0). Never returns a session that would run a command unconfined.
        """
        args = cls.build_args(
            ro=ro,
            rw=rw,
            cow=cow,
            profile=profile,
            require=require,
            timeout=timeout,
            idle_timeout=idle_timeout,
            report=report,
            extra_args=extra_args,
        )
        return cls.start_with_args(
            args,
            name=name,
            cwd=cwd,
            env=env,
            jail=jail,
            verify=verify,
        )

    @classmethod
    def start_with_args(
        cls,
        args: Sequence[str],
        *,
        name: str | None = None,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        jail: str | os.PathLike[str] | None = None,
        verify: bool = True,
    ) -> JailSession:
        """:meth:`start` with the flags already built (:meth:`build_args`)."""
        jail_path = find_jail(jail)
        name = name if name is not None else f"py-{secrets.token_hex(4)}"
        cwd_path = os.path.abspath(os.fspath(cwd) if cwd is not None else os.getcwd())
        args = list(args)
        if any(not isinstance(a, str) for a in args):
            raise TypeError("jail's flags must be strings")
        run_env, env_flags = _start_env(env)
        args = env_flags + args
        writable = _writable_grant_over(jail_path, args, cwd_path) or _writable_in_policy(
            jail_path, args, cwd_path, run_env
        )
        if writable is not None:
            # A command could replace it, and the `jail status` of a later verify() (attach,
            # a resumed SDK session) would be the command's own.
            raise SessionStartError(
                f"the jail binary {jail_path} would be writable inside the session ({writable}):"
                " keep it outside every --rw and --cow path"
            )
        try:
            proc = _run_control(
                [jail_path, "session", "start", "--name", name, *args],
                cwd=cwd_path,
                env=run_env,
            )
        except _ControlTimeout as e:
            # The client was killed; its supervisor may still bring the session up: ended
            # here, never left running with nobody holding it.
            cls(name, jail=jail_path, cwd=cwd_path, args=args)._stop_quietly()
            raise SessionStartError(f"{e}: the session {name} was stopped") from e
        if proc.returncode != 0:
            stderr = _text(proc.stderr).strip()
            raise SessionStartError(
                f"jail session start failed (exit {proc.returncode}): {stderr}",
                exit_code=proc.returncode,
                stderr=stderr,
            )
        started = _text(proc.stdout).strip()
        if started != name:
            raise SessionStartError(f"jail session start answered {started!r}, not {name!r}")
        session = cls(name, jail=jail_path, cwd=cwd_path, args=args)
        if verify:
            try:
                session.verify()
            except BaseException:
                session._stop_quietly()
                raise
        return session

    @classmethod
    def attach(
        cls,
        name: str,
        *,
        jail: str | os.PathLike[str] | None = None,
        verify: bool = True,
        require: str | None = "full",
    ) -> JailSession:
        """A session another process started (`jail session list` must show it).

        With `require` (`full` unless asked otherwise), the level the session's supervisor
        reports to `jail session list` on this side must reach it: no command of the session
        can speak there. `verify` runs `jail status` inside, as :meth:`start` does; the
        commands that ran before may have changed what it can see, so the level from outside
        is the check that counts for a session this process did not start."""
        jail_path = find_jail(jail)
        info = _session_info(jail_path, name)
        if info is None:
            raise SessionGone(f"no jail session {name!r}")
        if require is not None:
            level = str(info.get("level"))
            needed = _REQUIRED_LEVEL.get(require, require)
            if _LEVELS.get(level, -1) < _LEVELS.get(needed, len(_LEVELS)):
                raise NotConfined(
                    f"jail session {name} runs at level {level!r}, {require!r} required",
                    exit_code=0,
                    output=json.dumps(info),
                )
        session = cls(name, jail=jail_path, cwd=str(info.get("cwd", "/")))
        if verify:
            session.verify()
        return session

    # -- exec ----------------------------------------------------------------------------

    def exec_argv(
        self,
        argv: Sequence[str | os.PathLike[str]],
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> list[str]:
        """The `jail exec` command line for `argv`. Values of `env` are not in it: they pass
        through the client's environment (`--env NAME`), so no other user sees them in
        /proc/PID/cmdline; except those that would steer the client itself (`LD_PRELOAD`,
        `XDG_RUNTIME_DIR`, `HOME`, ...: `--env NAME=VALUE`), which never reach its
        environment."""
        if not argv:
            raise ValueError("an empty command")
        words = [os.fspath(a) for a in argv]
        if any(not isinstance(w, str) for w in words):
            raise TypeError("a command's words must be str")
        out = [self.jail, "exec", self.name]
        if cwd is not None:
            out += [f"--cwd={os.fspath(cwd)}"]
        for key, value in (env or {}).items():
            if not isinstance(key, str) or not key or "=" in key or "\0" in key:
                raise ValueError(f"not a variable name: {key!r}")
            if not isinstance(value, str) or "\0" in value:
                raise ValueError(f"the value of {key} is not a string without NUL")
            out += [f"--env={key}={value}" if _client_var(key) else f"--env={key}"]
        if timeout is not None:
            out += ["--timeout", jail_duration(timeout)]
        return out + ["--", *words]

    def _client_env(self, env: Mapping[str, str] | None) -> dict[str, str] | None:
        passed = {k: v for k, v in (env or {}).items() if not _client_var(k)}
        if not passed:
            return None
        merged = dict(os.environ)
        merged.update(passed)
        return merged

    def exec(
        self,
        argv: Sequence[str | os.PathLike[str]],
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        input: bytes | None = None,
        max_output: int | None = DEFAULT_MAX_OUTPUT,
        end_on_overflow: bool = False,
    ) -> ExecResult:
        """Run `argv` in the session and wait: its exit code (124 after `timeout`, 125 when
        jail refused, 126/127 as a shell gives them), stdout and stderr.

        Each of stdout and stderr keeps at most `max_output` bytes (None: no bound): its
        first and last half, with :func:`truncation_marker` where the rest was; the result's
        `stdout_truncated` / `stderr_truncated` count what was left out. With
        `end_on_overflow`, the command is ended (SIGTERM to its process group through the
        client) as soon as a stream passes `max_output`, and `output_overflowed` is set.

        Raises :class:`SessionGone` when jail answered 125 and the session is not there."""
        full = self.exec_argv(argv, cwd=cwd, env=env, timeout=timeout)
        backstop = None if timeout is None else timeout + _BACKSTOP_GRACE_S
        began = time.monotonic()
        run = _Running(full, self._client_env(env), input, max_output, end_on_overflow)
        backstopped = False
        try:
            try:
                run.proc.wait(timeout=backstop)
            except subprocess.TimeoutExpired:
                # jail exec passes SIGTERM on to the command's process group.
                backstopped = True
                run.proc.send_signal(signal.SIGTERM)
                try:
                    run.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    run.proc.kill()
                    run.proc.wait()
        except BaseException:
            run.proc.kill()
            run.proc.wait()
            raise
        return self._finish(argv, run, timeout, began, backstopped)

    async def aexec(
        self,
        argv: Sequence[str | os.PathLike[str]],
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        input: bytes | None = None,
        max_output: int | None = DEFAULT_MAX_OUTPUT,
        end_on_overflow: bool = False,
    ) -> ExecResult:
        """:meth:`exec` for asyncio. A cancelled call ends its command (SIGTERM to the
        `jail exec` client, which passes it on to the command's process group)."""
        full = self.exec_argv(argv, cwd=cwd, env=env, timeout=timeout)
        backstop = None if timeout is None else timeout + _BACKSTOP_GRACE_S
        began = time.monotonic()
        # A subprocess.Popen and threads, not asyncio's subprocess transport: before Python
        # 3.12 its wait() also waits for the output pipes to close, and a pipe a left-behind
        # process holds must outlive the event loop without it.
        run = _Running(full, self._client_env(env), input, max_output, end_on_overflow)
        backstopped = False
        try:
            await asyncio.wait_for(_exited(run.proc), timeout=backstop)
        except asyncio.TimeoutError:
            backstopped = True
            await _end(run.proc)
        except BaseException:
            await asyncio.shield(_end(run.proc))
            raise
        return await asyncio.to_thread(self._finish, argv, run, timeout, began, backstopped)

    def _finish(
        self,
        argv: Sequence[str | os.PathLike[str]],
        run: _Running,
        timeout: float | None,
        began: float,
        backstopped: bool,
    ) -> ExecResult:
        stdout, stderr, left_open = run.output()
        if backstopped:
            result = ExecResult(
                list(argv_str(argv)), EXIT_TIMEOUT, stdout, stderr, timed_out=True,
                output_left_open=left_open,
            )
        else:
            assert run.proc.returncode is not None
            result = self._result(
                argv, run.proc.returncode, stdout, stderr, timeout, began, left_open
            )
        result.stdout_truncated, result.stderr_truncated = run.truncated()
        result.output_overflowed = run.overflowed.is_set()
        return result

    def _result(
        self,
        argv: Sequence[str | os.PathLike[str]],
        code: int,
        stdout: bytes,
        stderr: bytes,
        timeout: float | None,
        began: float,
        left_open: bool = False,
    ) -> ExecResult:
        if code == EXIT_JAIL_ERROR and not self.alive():
            raise SessionGone(f"jail session {self.name} is gone: {_text(stderr).strip()}")
        if code < 0:  # the client itself was killed by a signal
            code = 128 - code
        return ExecResult(
            list(argv_str(argv)),
            code,
            stdout,
            stderr,
            # 124 is also a code any command can exit with: only one given after the
            # timeout had passed is the timeout's.
            timed_out=(
                timeout is not None
                and code == EXIT_TIMEOUT
                and time.monotonic() - began >= timeout
            ),
            output_left_open=left_open,
        )

    # -- status, list, stop --------------------------------------------------------------

    def status(self) -> ExecResult:
        """`jail status` run inside the session (exit 0: confirmed inside a jail)."""
        return self.exec([self.jail, "status"], timeout=30)

    def verify(self) -> None:
        """Raise :class:`NotConfined` unless the session's execs are isolated from one another
        (its supervisor says so on this side) and `jail status` inside it exits 0."""
        result = self.status()
        if result.exit_code != 0:
            output = (result.stdout_text + result.stderr_text).strip()
            if result.exit_code in (126, 127):
                output += (
                    f" (the jail binary {self.jail} is not visible inside the session: keep it"
                    " outside the home directories and /tmp, or on PATH)"
                )
            raise NotConfined(
                f"jail status in session {self.name} exited {result.exit_code}: {output}",
                exit_code=result.exit_code,
                output=output,
            )
        info = self.info()
        if info is None:
            raise SessionGone(f"jail session {self.name} is not listed")
        if info.get("execs_isolated") is not True:
            # Where execs share one Landlock domain, a process one command left could reach
            # the status exec (its memory, its output) and change what it answers.
            raise NotConfined(
                f"jail session {self.name}: its commands share one Landlock domain (jail "
                "session list: not isolated, as with a profile that allows unix sockets or "
                "user namespaces), so a process one command leaves could change what a later "
                "jail status answers",
                exit_code=None,
                output="",
            )
        self.verified_status = result.stdout_text

    def info(self) -> dict[str, Any] | None:
        """This session's entry in `jail session list --json`, or None when it is gone."""
        return _session_info(self.jail, self.name)

    def alive(self) -> bool:
        return self.info() is not None

    def stop(self) -> Outcome:
        """Stop the session (every process of it ends) and return how it ended.

        Raises :class:`SessionGone` when there is no such session, :class:`JailError` when
        jail refused the stop (the session goes on) or answered but the session is still
        listed afterwards (never taken for its end)."""
        if self.outcome is not None:
            return self.outcome
        proc = _run_control([self.jail, "session", "stop", self.name, "--json"])
        text = _text(proc.stdout).strip()
        try:
            raw = json.loads(text) if text else None
        except json.JSONDecodeError:
            raw = None
        if not isinstance(raw, dict):
            # The stop's stderr is jail's own (no command of the session writes there). Only
            # its "no such session" is an end: a refusal may come to a caller that `session
            # list` does not show the session to either (one more confined than it).
            why = _text(proc.stderr).strip()
            if "no such session" in why:
                raise SessionGone(f"jail session stop {self.name}: {why}")
            raise JailError(
                f"jail session stop {self.name} refused (exit {proc.returncode}): {why}; "
                "the session may go on"
            )
        outcome = Outcome.parse(self.name, raw)
        # Jail answers a stop only once the session has ended; a session still listed after
        # it is never taken for an ended one.
        if self.alive():
            raise JailError(
                f"jail session stop {self.name} answered {outcome.status!r}, but the session "
                "is still listed: its processes may still run"
            )
        self.outcome = outcome
        return self.outcome

    def _stop_quietly(self) -> None:
        try:
            self.stop()
        except (JailError, OSError, subprocess.SubprocessError):
            pass

    def __enter__(self) -> JailSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Pump(threading.Thread):
    """Reads one of a `jail exec` client's output pipes to its end, keeping at most `limit`
    bytes of it (the first half and the last); after :meth:`take`, what comes later is read
    and dropped (a pipe left full would stop its writers). `on_excess` is called once, from
    this thread, when the stream passes `limit`."""

    def __init__(
        self, stream: Any, limit: int | None, on_excess: Any = None
    ) -> None:
        super().__init__(daemon=True)
        self._stream = stream
        self._limit = limit
        self._head_max = limit // 2 if limit is not None else None
        self._tail_max = limit - limit // 2 if limit is not None else 0
        self._head = bytearray()
        self._tail = bytearray()
        self._total = 0
        self._on_excess = on_excess
        self._keep = True
        self._lock = threading.Lock()
        self.dropped = 0

    def run(self) -> None:
        try:
            while chunk := self._stream.read1(65536):
                excess = False
                with self._lock:
                    if not self._keep:
                        continue
                    before = self._total
                    self._total += len(chunk)
                    if self._limit is None:
                        self._head += chunk
                        continue
                    room = self._head_max - len(self._head)
                    if room > 0:
                        self._head += chunk[:room]
                        chunk = chunk[room:]
                    if chunk and self._tail_max:
                        self._tail += chunk
                        if len(self._tail) > 2 * self._tail_max:
                            del self._tail[: len(self._tail) - self._tail_max]
                    excess = before <= self._limit < self._total
                if excess and self._on_excess is not None:
                    self._on_excess()
        except (OSError, ValueError):
            pass
        finally:
            try:
                self._stream.close()
            except OSError:
                pass

    def take(self) -> bytes:
        with self._lock:
            self._keep = False
            if self._limit is None or self._total <= self._limit:
                return bytes(self._head + self._tail)
            tail = self._tail[len(self._tail) - self._tail_max :] if self._tail_max else b""
            self.dropped = self._total - len(self._head) - len(tail)
            return bytes(self._head) + truncation_marker(self.dropped) + bytes(tail)


def _feed(stdin: Any, data: bytes) -> None:
    try:
        stdin.write(data)
    except (BrokenPipeError, OSError, ValueError):
        pass
    finally:
        try:
            stdin.close()
        except (BrokenPipeError, OSError):
            pass


class _Running:
    """One `jail exec` client: its output read by threads, its input fed by one."""

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str] | None,
        input: bytes | None,
        max_output: int | None = DEFAULT_MAX_OUTPUT,
        end_on_overflow: bool = False,
    ):
        if max_output is not None and (
            not isinstance(max_output, int) or isinstance(max_output, bool) or max_output < 0
        ):
            raise ValueError(f"max_output must be a number of bytes or None, not {max_output!r}")
        self.overflowed = threading.Event()
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        on_excess = self._overflow if end_on_overflow else None
        self.pumps = [
            _Pump(self.proc.stdout, max_output, on_excess),
            _Pump(self.proc.stderr, max_output, on_excess),
        ]
        for pump in self.pumps:
            pump.start()
        if input is not None:
            threading.Thread(target=_feed, args=(self.proc.stdin, input), daemon=True).start()

    def output(self) -> tuple[bytes, bytes, bool]:
        """Once the client has exited: stdout, stderr, and whether something the command
        left running still holds them (not waited for past the grace)."""
        deadline = time.monotonic() + _OUTPUT_GRACE_S
        for pump in self.pumps:
            pump.join(max(0.0, deadline - time.monotonic()))
        left_open = any(pump.is_alive() for pump in self.pumps)
        stdout, stderr = (pump.take() for pump in self.pumps)
        return stdout, stderr, left_open

    def truncated(self) -> tuple[int, int]:
        """The bytes of stdout and of stderr left out (after :meth:`output`)."""
        return self.pumps[0].dropped, self.pumps[1].dropped

    def _overflow(self) -> None:
        # SIGTERM to the client: it passes it on to the command's process group.
        # A command that ignores it: the client is killed 5 s later (session stop ends what
        # is left).
        self.overflowed.set()
        for sig, delay in ((signal.SIGTERM, 0.0), (signal.SIGKILL, 5.0)):
            timer = threading.Timer(delay, self._signal, (sig,))
            timer.daemon = True
            timer.start()

    def _signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(sig)
            except ProcessLookupError:
                pass


def argv_str(argv: Sequence[str | os.PathLike[str]]) -> list[str]:
    return [os.fspath(a) for a in argv]  # type: ignore[misc]


async def _exited(proc: subprocess.Popen[bytes]) -> None:
    """Until the `jail exec` client has exited (its pipes may stay open: see :class:`_Pump`)."""
    pause = 0.002
    while proc.poll() is None:
        await asyncio.sleep(pause)
        pause = min(pause * 2, 0.05)


async def _end(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the client (it passes it on to the command's group), SIGKILL after 5 s."""
    if proc.poll() is None:
        try:
            proc.send_signal(signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            await asyncio.wait_for(_exited(proc), timeout=5)
        except asyncio.TimeoutError:
            try:
                proc.kill()
            except ProcessLookupError:
                pass
            await _exited(proc)


def _session_info(jail: str, name: str) -> dict[str, Any] | None:
    proc = _run_control([jail, "session", "list", "--json"])
    if proc.returncode != 0:
        raise JailError(f"jail session list failed: {_text(proc.stderr).strip()}")
    try:
        sessions = json.loads(proc.stdout)["sessions"]
        if not isinstance(sessions, list):
            raise TypeError("sessions is not a list")
    except (ValueError, KeyError, TypeError) as e:
        # never taken for "not listed" (an end): an answer not understood is an error
        raise JailError(f"jail session list --json printed no session list ({e})") from e
    for entry in sessions:
        if isinstance(entry, dict) and entry.get("name") == name:
            return dict(entry)
    return None


# `jail session start` flags that a one-shot `jail` (its --dry-run) does not take, each with
# its value.
_SESSION_ONLY_FLAGS = ("--idle-timeout", "--name")


def _writable_in_policy(
    jail: str, args: Sequence[str], cwd: str, env: dict[str, str] | None
) -> str | None:
    """Where the policy jail resolves for these flags (`jail ... --dry-run`, on this side)
    lets a command write the jail binary: a profile's writable paths (`workspace` makes the
    current directory writable, `opencode` the XDG directories), `--cache` layers, `--tmp
    host`, as well as `--rw`/`--cow`. The most specific rule over the binary decides."""
    words: list[str] = []
    skip = False
    for word in args:
        if skip:
            skip = False
            continue
        if word in _SESSION_ONLY_FLAGS:
            skip = True
            continue
        if word.startswith(tuple(f + "=" for f in _SESSION_ONLY_FLAGS)):
            continue
        words.append(word)
    proc = _run_control([jail, *words, "--dry-run", "--", "true"], cwd=cwd, env=env)
    if proc.returncode != 0:
        stderr = _text(proc.stderr).strip()
        raise SessionStartError(
            f"jail session start failed (its flags' --dry-run exited {proc.returncode}): "
            f"{stderr}",
            exit_code=proc.returncode,
            stderr=stderr,
        )
    try:
        rules = json.loads(proc.stdout)["policy"]["rules"]
        if not isinstance(rules, list):
            raise TypeError("rules")
    except (ValueError, KeyError, TypeError) as e:
        raise SessionStartError(f"jail --dry-run printed no policy rules ({e})") from e
    real = os.path.realpath(jail)
    best: dict[str, Any] | None = None
    best_len = -1
    for rule in rules:
        path = rule.get("path") if isinstance(rule, dict) else None
        if not isinstance(path, str) or not path.startswith("/"):
            continue
        for root in {path, os.path.realpath(path)}:
            if (real == root or real.startswith(root.rstrip("/") + "/")) and len(root) > best_len:
                best, best_len = rule, len(root)
    if best is not None and best.get("access") not in ("ro", "hide"):
        origin = best.get("origin") or {}
        where = " ".join(str(origin.get(k)) for k in ("from", "detail") if origin.get(k))
        return f"{best['path']} is {best.get('access')} by {where or 'the policy'}"
    return None


def _writable_grant_over(path: str, args: Sequence[str], cwd: str) -> str | None:
    """The `--rw`/`--cow` flag among `args` whose path holds `path` (both real paths), if any."""
    real = os.path.realpath(path)
    words = list(args)
    for i, word in enumerate(words):
        for flag in ("--rw", "--cow"):
            if word == flag and i + 1 < len(words):
                value = words[i + 1]
            elif word.startswith(flag + "="):
                value = word[len(flag) + 1 :]
            else:
                continue
            root = os.path.realpath(os.path.join(cwd, value))
            if real == root or real.startswith(root.rstrip(os.sep) + os.sep):
                return f"{flag} {value}"
    return None
