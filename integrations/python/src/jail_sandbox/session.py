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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
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
    """`jail status`, run inside the session, did not confirm confinement (exit 0)."""

    def __init__(self, message: str, *, exit_code: int, output: str) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.output = output


class SessionGone(JailError):
    """The session is not there (ended, stopped, or its supervisor died)."""


def find_jail(jail: str | os.PathLike[str] | None = None) -> str:
    """The absolute path of the jail binary: `jail`, else `$JAIL_BIN`, else `jail` on PATH."""
    candidate = os.fspath(jail) if jail is not None else os.environ.get("JAIL_BIN")
    if candidate is None:
        candidate = shutil.which("jail")
        if candidate is None:
            raise JailNotFound("no `jail` binary: pass jail=..., set JAIL_BIN or put it on PATH")
    elif os.sep not in candidate:
        found = shutil.which(candidate)
        if found is None:
            raise JailNotFound(f"no `{candidate}` on PATH")
        candidate = found
    path = os.path.abspath(candidate)
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise JailNotFound(f"{path} is not an executable file")
    return path


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
    """The command's `--timeout` ended it (`jail exec` exited 124 with a timeout set)."""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    @property
    def stdout_text(self) -> str:
        return _text(self.stdout)

    @property
    def stderr_text(self) -> str:
        return _text(self.stderr)


@dataclass
class Outcome:
    """How a session ended: `jail session stop --json`, plus the copy-on-write runs it left."""

    name: str
    status: str
    exit_code: int
    level: str
    gaps: list[str]
    report: dict[str, Any] | None
    cow_runs: list[dict[str, Any]] = field(default_factory=list)
    """The pending runs of `jail runs --json` this session left (a `--cow` session that
    changed something): each `id` is for `jail diff ID` / `jail apply ID`."""
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def cow_run_ids(self) -> list[str]:
        return [run["id"] for run in self.cow_runs]


def _run_control(argv: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            list(argv),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=kwargs.pop("timeout", _CONTROL_TIMEOUT_S),
            check=False,
            **kwargs,
        )
    except FileNotFoundError as e:
        raise JailNotFound(str(e)) from e


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
        cow_roots: Sequence[str] = (),
        runs_before: Iterable[str] = (),
    ) -> None:
        self.name = name
        self.jail = jail
        self.cwd = cwd
        self.args = list(args)
        self.cow_roots = list(cow_roots)
        self._runs_before = set(runs_before)
        self.report_path: str | None = None
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
        cow_list = [os.path.abspath(os.fspath(p)) for p in cow]
        args = cls.build_args(
            ro=ro,
            rw=rw,
            cow=cow_list,
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
            cow_roots=cow_list,
            report_path=report,
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
        cow_roots: Iterable[str | os.PathLike[str]] = (),
        report_path: str | os.PathLike[str] | None = None,
    ) -> JailSession:
        """:meth:`start` with the flags already built (:meth:`build_args`); `cow_roots` are
        the `--cow` paths among them, whose runs :meth:`stop` reports, and `report_path` the
        `--report` file, which :meth:`stop` reads into the outcome."""
        jail_path = find_jail(jail)
        name = name if name is not None else f"py-{secrets.token_hex(4)}"
        cwd_path = os.path.abspath(os.fspath(cwd) if cwd is not None else os.getcwd())
        args = list(args)
        if any(not isinstance(a, str) for a in args):
            raise TypeError("jail's flags must be strings")
        cow_real = [os.path.realpath(os.fspath(p)) for p in cow_roots]
        runs_before: set[str] = set()
        if cow_real:
            runs_before = {run["id"] for run in _list_runs(jail_path)}
        proc = _run_control(
            [jail_path, "session", "start", "--name", name, *args],
            cwd=cwd_path,
            env=dict(env) if env is not None else None,
        )
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
        session = cls(
            name,
            jail=jail_path,
            cwd=cwd_path,
            args=args,
            cow_roots=cow_real,
            runs_before=runs_before,
        )
        if report_path is not None:
            session.report_path = os.path.abspath(os.fspath(report_path))
        if verify:
            try:
                session.verify()
            except BaseException:
                session._stop_quietly()
                raise
        return session

    @classmethod
    def attach(
        cls, name: str, *, jail: str | os.PathLike[str] | None = None, verify: bool = True
    ) -> JailSession:
        """A session another process started (`jail session list` must show it)."""
        jail_path = find_jail(jail)
        info = _session_info(jail_path, name)
        if info is None:
            raise SessionGone(f"no jail session {name!r}")
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
        /proc/PID/cmdline."""
        if not argv:
            raise ValueError("an empty command")
        words = [os.fspath(a) for a in argv]
        if any(not isinstance(w, str) for w in words):
            raise TypeError("a command's words must be str")
        out = [self.jail, "exec", self.name]
        if cwd is not None:
            out += ["--cwd", os.fspath(cwd)]
        for key in env or {}:
            if not key or "=" in key or "\0" in key:
                raise ValueError(f"not a variable name: {key!r}")
            out += ["--env", key]
        if timeout is not None:
            out += ["--timeout", jail_duration(timeout)]
        return out + ["--", *words]

    def _client_env(self, env: Mapping[str, str] | None) -> dict[str, str] | None:
        if not env:
            return None
        merged = dict(os.environ)
        merged.update(env)
        return merged

    def exec(
        self,
        argv: Sequence[str | os.PathLike[str]],
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        input: bytes | None = None,
    ) -> ExecResult:
        """Run `argv` in the session and wait: its exit code (124 after `timeout`, 125 when
        jail refused, 126/127 as a shell gives them), stdout and stderr.

        Raises :class:`SessionGone` when jail answered 125 and the session is not there."""
        full = self.exec_argv(argv, cwd=cwd, env=env, timeout=timeout)
        backstop = None if timeout is None else timeout + _BACKSTOP_GRACE_S
        proc = subprocess.Popen(
            full,
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self._client_env(env),
        )
        try:
            stdout, stderr = proc.communicate(input, timeout=backstop)
        except subprocess.TimeoutExpired:
            # jail exec passes SIGTERM on to the command's process group.
            proc.send_signal(signal.SIGTERM)
            try:
                stdout, stderr = proc.communicate(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                stdout, stderr = proc.communicate()
            return ExecResult(list(argv_str(argv)), EXIT_TIMEOUT, stdout, stderr, timed_out=True)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        return self._result(argv, proc.returncode, stdout, stderr, timeout)

    async def aexec(
        self,
        argv: Sequence[str | os.PathLike[str]],
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        input: bytes | None = None,
    ) -> ExecResult:
        """:meth:`exec` for asyncio. A cancelled call ends its command (SIGTERM to the
        `jail exec` client, which passes it on to the command's process group)."""
        full = self.exec_argv(argv, cwd=cwd, env=env, timeout=timeout)
        proc = await asyncio.create_subprocess_exec(
            *full,
            stdin=asyncio.subprocess.PIPE if input is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self._client_env(env),
        )
        backstop = None if timeout is None else timeout + _BACKSTOP_GRACE_S
        try:
            stdout, stderr = await asyncio.wait_for(proc.communicate(input), timeout=backstop)
        except asyncio.TimeoutError:
            await _end(proc)
            return ExecResult(list(argv_str(argv)), EXIT_TIMEOUT, b"", b"", timed_out=True)
        except BaseException:
            await asyncio.shield(_end(proc))
            raise
        assert proc.returncode is not None
        return self._result(argv, proc.returncode, stdout, stderr, timeout)

    def _result(
        self,
        argv: Sequence[str | os.PathLike[str]],
        code: int,
        stdout: bytes,
        stderr: bytes,
        timeout: float | None,
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
            timed_out=timeout is not None and code == EXIT_TIMEOUT,
        )

    # -- status, list, stop --------------------------------------------------------------

    def status(self) -> ExecResult:
        """`jail status` run inside the session (exit 0: confirmed inside a jail)."""
        return self.exec([self.jail, "status"], timeout=30)

    def verify(self) -> None:
        """Raise :class:`NotConfined` unless `jail status` inside the session exits 0."""
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
        self.verified_status = result.stdout_text

    def info(self) -> dict[str, Any] | None:
        """This session's entry in `jail session list --json`, or None when it is gone."""
        return _session_info(self.jail, self.name)

    def alive(self) -> bool:
        return self.info() is not None

    def stop(self) -> Outcome:
        """Stop the session (every process of it ends) and return how it ended."""
        if self.outcome is not None:
            return self.outcome
        attempts = 0
        while True:
            attempts += 1
            proc = _run_control([self.jail, "session", "stop", self.name, "--json"])
            text = _text(proc.stdout).strip()
            try:
                raw = json.loads(text) if text else None
            except json.JSONDecodeError:
                raw = None
            if not isinstance(raw, dict):
                raise SessionGone(
                    f"jail session stop {self.name} (exit {proc.returncode}): "
                    f"{_text(proc.stderr).strip()}"
                )
            # Trust, then check: the session must be gone from the list once stop answered.
            if not self.alive():
                break
            if attempts >= 2:
                raise JailError(
                    f"jail session stop {self.name} answered {raw.get('status')!r} twice, "
                    "but the session is still listed: its processes may still run"
                )
        raw = dict(raw, stop_attempts=attempts)
        cow_runs: list[dict[str, Any]] = []
        if self.cow_roots:
            roots = set(self.cow_roots)
            cow_runs = [
                run
                for run in _list_runs(self.jail)
                if run.get("id") not in self._runs_before
                and run.get("state") == "pending"
                and set(run.get("roots", [])) <= roots
            ]
        report = raw.get("report")
        if report is None and self.report_path is not None:
            # `session stop` leaves the report in the --report file.
            try:
                with open(self.report_path, "rb") as f:
                    report = json.load(f)
            except (OSError, ValueError):
                report = None
        self.outcome = Outcome(
            name=self.name,
            status=str(raw.get("status")),
            exit_code=int(raw.get("exit_code", proc.returncode)),
            level=str(raw.get("level")),
            gaps=list(raw.get("gaps") or []),
            report=report,
            cow_runs=cow_runs,
            raw=raw,
        )
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


def argv_str(argv: Sequence[str | os.PathLike[str]]) -> list[str]:
    return [os.fspath(a) for a in argv]  # type: ignore[misc]


async def _end(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        try:
            proc.send_signal(signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            await asyncio.wait_for(proc.wait(), timeout=5)
        except asyncio.TimeoutError:
            try:
                proc.kill()
            except ProcessLookupError:
                pass
            await proc.wait()


def _session_info(jail: str, name: str) -> dict[str, Any] | None:
    proc = _run_control([jail, "session", "list", "--json"])
    if proc.returncode != 0:
        raise JailError(f"jail session list failed: {_text(proc.stderr).strip()}")
    for entry in json.loads(proc.stdout).get("sessions", []):
        if entry.get("name") == name:
            return dict(entry)
    return None


def _list_runs(jail: str) -> list[dict[str, Any]]:
    proc = _run_control([jail, "runs", "--json"])
    if proc.returncode != 0:
        raise JailError(f"jail runs failed: {_text(proc.stderr).strip()}")
    runs = json.loads(proc.stdout or b"[]")
    return [dict(r) for r in runs] if isinstance(runs, list) else []
