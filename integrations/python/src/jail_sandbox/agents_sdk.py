"""A sandbox client for the OpenAI Agents SDK (`openai-agents`, `agents.sandbox`) over jail.

    from agents import Runner
    from agents.run import RunConfig
    from agents.sandbox import SandboxAgent, SandboxRunConfig
    from jail_sandbox.agents_sdk import JailSandboxClient, JailSandboxClientOptions

    client = JailSandboxClient()
    run_config = RunConfig(sandbox=SandboxRunConfig(
        client=client, options=JailSandboxClientOptions(workspace="./repo", mode="cow")))
    result = await Runner.run(agent, "fix the failing test", run_config=run_config)
    client.outcomes[-1].cow_run          # for `jail diff ID` / `jail apply ID` (None: no change)

One `jail session` per SDK session. Every SDK operation that touches the workspace (the
shell tool's commands, apply_patch's reads and writes, manifest materialization, ls, mkdir,
rm, snapshots) is a `jail exec` into that session, so it is confined as a one-shot `jail`
run would be: the kernel, not the SDK's path checks, decides what may be written. Nothing
runs on the host outside the session. The session is started with `--require full` unless
asked otherwise and must answer `jail status` with exit 0 from inside before the SDK gets it;
otherwise the SDK's `start()` raises and no command runs.

Pinned against openai-agents 0.24.0.
"""

from __future__ import annotations

import asyncio
import io
import os
import secrets
import shutil
import tarfile
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from agents.sandbox.errors import (
    ExecTimeoutError,
    ExecTransportError,
    WorkspaceArchiveReadError,
    WorkspaceArchiveWriteError,
    WorkspaceReadNotFoundError,
    WorkspaceStartError,
)
from agents.sandbox.manifest import Manifest
from agents.sandbox.materialization import MaterializationResult
from agents.sandbox.session import SandboxSession, SandboxSessionState
from agents.sandbox.session.base_sandbox_session import BaseSandboxSession
from agents.sandbox.session.dependencies import Dependencies
from agents.sandbox.session.manager import Instrumentation
from agents.sandbox.session.sandbox_client import BaseSandboxClient, BaseSandboxClientOptions
from agents.sandbox.session.workspace_payloads import coerce_write_payload
from agents.sandbox.snapshot import SnapshotBase, SnapshotSpec, resolve_snapshot
from agents.sandbox.types import ExecResult, User
from agents.sandbox.util.tar_utils import UnsafeTarMemberError, validate_tarfile
from agents.sandbox.workspace_paths import sandbox_path_str

from .session import (
    DEFAULT_MAX_OUTPUT,
    JailError,
    JailSession,
    Outcome,
    SessionGone,
    find_jail,
)
from .session import ExecResult as JailExecResult

__all__ = [
    "JailSandboxClient",
    "JailSandboxClientOptions",
    "JailSandboxSession",
    "JailSandboxSessionState",
]

PINNED_AGENTS_VERSION = "0.24.0"
_DEFAULT_MANIFEST_ROOT = str(Manifest.model_fields["root"].default)
_READ_TIMEOUT_S = 60.0
# A write's `cat > PATH` is bounded too: a command can leave a FIFO at PATH, whose open would
# wait for a reader forever.
_WRITE_TIMEOUT_S = 60.0
DEFAULT_MAX_FILE_BYTES = 1024 * 1024 * 1024
"""The most a file read or a workspace snapshot may bring into this process (the SDK's own
default bound on an archive's input, `SandboxArchiveLimits.max_input_bytes`)."""


class JailSandboxClientOptions(BaseSandboxClientOptions):
    """How the jail session of a new SDK session is built.

    `workspace` is a host directory that becomes the manifest's root, at the same path inside
    (jail does not move paths); without it, the manifest's own root when it is not the SDK's
    default `/workspace`, else a fresh temporary directory that `delete()` removes. `mode`
    is how the workspace is given: `ro` (`--ro`: every write fails with the kernel's EROFS),
    `rw` (`--rw`, with jail's guards on what runs on the host later), or `cow` (`--cow`: the
    writes wait in a layer for `jail diff` / `jail apply`; see `Outcome.cow_run`).
    """

    type: Literal["jail"] = "jail"
    workspace: str | None = None
    mode: Literal["ro", "rw", "cow"] = "rw"
    profile: str | None = None
    require: str | None = "full"
    session_timeout: str | None = None
    """Bounds the whole session (`--timeout`, e.g. `30m`)."""
    idle_timeout: str | None = None
    ro_paths: tuple[str, ...] = ()
    rw_paths: tuple[str, ...] = ()
    report: str | None = None
    """A file for the run report (`--report`) too; the outcome always carries it."""
    extra_args: tuple[str, ...] = ()
    """More `jail session start` flags (`--net`, `--limit`, ...), as a list of words."""


class JailSandboxSessionState(SandboxSessionState):
    type: Literal["jail"] = "jail"
    jail_name: str
    jail_args: list[str]
    workspace_root_owned: bool = False
    outcome: dict[str, object] | None = None
    """How the session ended (status, exit_code, level, gaps, cow_run), without the report."""


class JailSandboxSession(BaseSandboxSession):
    """An SDK sandbox session whose every operation is a `jail exec` into one jail session."""

    state: JailSandboxSessionState

    def __init__(
        self,
        *,
        state: JailSandboxSessionState,
        jail: str,
        env: dict[str, str] | None = None,
        on_outcome: Callable[[Outcome], None] | None = None,
        may_attach: bool = True,
        max_output_bytes: int | None = DEFAULT_MAX_OUTPUT,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    ) -> None:
        self.state = state
        self._max_output = max_output_bytes
        self._max_file = max_file_bytes
        self._may_attach = may_attach
        self._jail_bin = jail
        self._env = env
        self._on_outcome = on_outcome
        self._jail: JailSession | None = None
        self.outcome: Outcome | None = None

    @property
    def jail_session(self) -> JailSession | None:
        """The live :class:`JailSession`, once started."""
        return self._jail

    # -- lifecycle -----------------------------------------------------------------------

    async def _ensure_backend_started(self) -> None:
        if self._jail is not None and self.outcome is None:
            return
        root = self.state.manifest.root
        if not await asyncio.to_thread(os.path.isdir, root):
            raise WorkspaceStartError(path=Path(root), context={"reason": "workspace_missing"})
        try:
            existing = None
            if self._may_attach:
                # A resumed state of this client's own: its session may still run.
                existing = await asyncio.to_thread(_attach_if_alive, self._jail_bin, self.state)
            if existing is not None:
                self._jail = existing
                self._set_start_state_preserved(True)
                return
            self._jail = await asyncio.to_thread(
                JailSession.start_with_args,
                self.state.jail_args,
                name=self.state.jail_name,
                cwd=root,
                env=self._env,
                jail=self._jail_bin,
                verify=True,
            )
        except JailError as e:
            # Fail closed: the SDK's start() raises and nothing runs.
            raise WorkspaceStartError(
                path=Path(root),
                context={"reason": "jail_session_refused", "jail": str(e)},
                cause=e,
                message=f"jail could not give the confinement asked for: {e}",
            ) from e
        self.outcome = None
        self.state.outcome = None

    async def _after_start_failed(self) -> None:
        # A half-started session (the manifest could not be written, ...) is not left running.
        await self._stop_jail()

    async def _shutdown_backend(self) -> None:
        await self._stop_jail()

    async def _stop_jail(self) -> None:
        if self._jail is None or self.outcome is not None:
            return
        outcome = await asyncio.to_thread(self._jail.stop)
        self.outcome = outcome
        self.state.outcome = {
            k: outcome.raw.get(k) for k in ("status", "exit_code", "level", "gaps", "cow_run")
        }
        if self._on_outcome is not None:
            self._on_outcome(outcome)

    async def running(self) -> bool:
        if self._jail is None or self.outcome is not None:
            return False
        return await asyncio.to_thread(self._jail.alive)

    def supports_pty(self) -> bool:
        return False

    # -- exec ----------------------------------------------------------------------------

    def _prepare_exec_command(
        self,
        *command: str | Path,
        shell: bool | list[str],
        user: str | User | None,
    ) -> list[str]:
        if user:
            # sudo cannot gain anything inside a jail (no_new_privs, no capabilities).
            raise ValueError("JailSandboxSession runs every command as the session's own user")
        if shell is True:
            # As UnixLocal: no login shell, so PATH stays the session's.
            shell = ["sh", "-c"]
        return super()._prepare_exec_command(*command, shell=shell, user=None)

    async def _exec_internal(
        self, *command: str | Path, timeout: float | None = None
    ) -> ExecResult:
        return await self._jail_exec(command, timeout=timeout)

    async def _jail_exec(
        self,
        command: tuple[str | Path, ...] | list[str],
        *,
        timeout: float | None = None,
        input: bytes | None = None,
    ) -> ExecResult:
        """A command: stdout and stderr each bounded by `max_output_bytes` (marked where
        bytes were left out), as the SDK's shell tool shows them to the model."""
        result = await self._jail_run(
            command, timeout=timeout, input=input, max_output=self._max_output
        )
        return ExecResult(stdout=result.stdout, stderr=result.stderr, exit_code=result.exit_code)

    async def _jail_read(
        self, command: list[str], *, timeout: float | None, max_bytes: int | None = None
    ) -> tuple[ExecResult, bool]:
        """A command whose stdout is data (a file, an archive): never truncated, at most
        `max_file_bytes` of it; past that the command is ended and the second value is True."""
        limit = self._max_file if max_bytes is None else min(max_bytes, self._max_file)
        result = await self._jail_run(
            command, timeout=timeout, max_output=limit, end_on_overflow=True
        )
        sdk = ExecResult(stdout=result.stdout, stderr=result.stderr, exit_code=result.exit_code)
        return sdk, result.output_overflowed or result.stdout_truncated > 0

    async def _jail_run(
        self,
        command: tuple[str | Path, ...] | list[str],
        *,
        timeout: float | None = None,
        input: bytes | None = None,
        max_output: int | None,
        end_on_overflow: bool = False,
    ) -> JailExecResult:
        argv = [str(part) for part in command]
        if self._jail is None or self.outcome is not None:
            raise ExecTransportError(command=argv, context={"reason": "jail_session_not_running"})
        if timeout is not None and not timeout > 0:
            # The shell tool passes the model's yield_time_ms (>= 0): no time at all is a
            # timeout, as the SDK's own clients answer it; the command is never started.
            raise ExecTimeoutError(command=argv, timeout_s=timeout)
        env = await self.state.manifest.environment.resolve()
        try:
            result = await self._jail.aexec(
                argv,
                cwd=self.state.manifest.root,
                env=env or None,
                timeout=timeout,
                input=input,
                max_output=max_output,
                end_on_overflow=end_on_overflow,
            )
        except SessionGone as e:
            raise ExecTransportError(
                command=argv, context={"reason": "jail_session_gone"}, cause=e
            ) from e
        if result.timed_out:
            raise ExecTimeoutError(command=argv, timeout_s=timeout)
        return result

    # -- files ---------------------------------------------------------------------------

    async def read(self, path: Path, *, user: str | User | None = None) -> io.IOBase:
        if user:
            raise ValueError("JailSandboxSession runs every command as the session's own user")
        workspace_path = await self._validate_path_access(path)
        arg = sandbox_path_str(workspace_path)
        res, too_large = await self._jail_read(["cat", "--", arg], timeout=_READ_TIMEOUT_S)
        if too_large:
            # (a command may have made it a link to /dev/zero: never read without end)
            raise WorkspaceArchiveReadError(
                path=Path(path),
                context={"reason": "file_too_large", "max_bytes": self._max_file},
            )
        if not res.ok():
            await self._raise_read_error_from_exec(
                path=Path(path),
                workspace_path=workspace_path,
                command=("cat", "--", arg),
                result=res,
                user=user,
            )
        return io.BytesIO(res.stdout)

    async def _read_bounded(self, path: Path, *, max_bytes: int) -> bytes:
        workspace_path = await self._validate_path_access(path)
        res, too_large = await self._jail_read(
            [
                "sh",
                "-c",
                '[ -e "$1" ] || exit 44; [ -f "$1" ] || exit 45; head -c "$2" < "$1"',
                "sh",
                sandbox_path_str(workspace_path),
                str(max_bytes),
            ],
            timeout=_READ_TIMEOUT_S,
            max_bytes=max_bytes,
        )
        if res.exit_code == 44:
            raise WorkspaceReadNotFoundError(path=Path(path))
        if too_large or not res.ok():
            raise WorkspaceArchiveReadError(path=Path(path))
        return res.stdout

    async def write(
        self,
        path: Path,
        data: io.IOBase,
        *,
        user: str | User | None = None,
    ) -> None:
        if user:
            raise ValueError("JailSandboxSession runs every command as the session's own user")
        payload = coerce_write_payload(path=path, data=data)
        workspace_path = await self._validate_path_access(path, for_write=True)
        body = payload.stream.read()
        if isinstance(body, str):
            body = body.encode("utf-8")
        await self.mkdir(workspace_path.parent, parents=True)
        arg = sandbox_path_str(workspace_path)
        try:
            res = await self._jail_exec(
                ["sh", "-c", 'cat > "$1"', "sh", arg],
                input=bytes(body or b""),
                timeout=_WRITE_TIMEOUT_S,
            )
        except ExecTimeoutError as e:
            raise WorkspaceArchiveWriteError(
                path=workspace_path,
                context={"reason": "write_timed_out", "timeout_s": _WRITE_TIMEOUT_S},
                message=f"writing {workspace_path} in the jail did not end in "
                f"{_WRITE_TIMEOUT_S:g} s (a FIFO?)",
                cause=e,
            ) from e
        if not res.ok():
            # The kernel's answer (EROFS for a read-only project) is in stderr: it goes into
            # the message, which is what the SDK's tools show the model.
            stderr = res.stderr.decode("utf-8", errors="replace").strip()
            raise WorkspaceArchiveWriteError(
                path=workspace_path,
                context={"exit_code": res.exit_code, "stderr": stderr},
                message=f"failed to write {workspace_path} in the jail: {stderr}",
            )

    # -- manifest, snapshots -------------------------------------------------------------

    async def _apply_manifest(
        self,
        *,
        only_ephemeral: bool = False,
        provision_accounts: bool = True,
    ) -> MaterializationResult:
        _refuse_accounts(self.state.manifest)
        return await super()._apply_manifest(
            only_ephemeral=only_ephemeral, provision_accounts=provision_accounts
        )

    async def provision_manifest_accounts(self) -> None:
        _refuse_accounts(self.state.manifest)

    async def _persist_snapshot(self) -> None:
        # A session whose jail never started (start refused) ran nothing: there is no
        # workspace of its to persist, and an empty archive would wipe it on resume.
        if self._jail is None:
            return
        await super()._persist_snapshot()

    async def persist_workspace(self) -> io.IOBase:
        root = self.state.manifest.root
        excludes: list[str] = []
        for rel in sorted(self._persist_workspace_skip_relpaths()):
            excludes += ["--exclude", f"./{Path(rel).as_posix()}"]
        res, too_large = await self._jail_read(
            ["tar", "-C", root, *excludes, "-cf", "-", "."], timeout=None
        )
        if too_large:
            raise WorkspaceArchiveReadError(
                path=Path(root),
                context={"reason": "workspace_too_large", "max_bytes": self._max_file},
            )
        if not res.ok():
            raise WorkspaceArchiveReadError(
                path=Path(root),
                context={"stderr": res.stderr.decode("utf-8", errors="replace")},
            )
        return io.BytesIO(res.stdout)

    async def hydrate_workspace(self, data: io.IOBase) -> None:
        root = self.state.manifest.root
        # A snapshot store hands back what it holds: at most what persist_workspace may make.
        payload = data.read(self._max_file + 1)
        if isinstance(payload, str):
            payload = payload.encode("utf-8")
        if len(payload) > self._max_file:
            raise WorkspaceArchiveWriteError(
                path=Path(root),
                context={"reason": "snapshot_too_large", "max_bytes": self._max_file},
            )
        try:
            with tarfile.open(fileobj=io.BytesIO(payload), mode="r:*") as tar:
                validate_tarfile(tar, allow_external_symlink_targets=False)
        except UnsafeTarMemberError as e:
            raise WorkspaceArchiveWriteError(
                path=Path(root), context={"reason": e.reason, "member": e.member}, cause=e
            ) from e
        except (tarfile.TarError, OSError) as e:
            raise WorkspaceArchiveWriteError(path=Path(root), cause=e) from e
        res = await self._jail_exec(
            ["tar", "-C", root, "--no-same-owner", "-xf", "-"], input=bytes(payload)
        )
        if not res.ok():
            raise WorkspaceArchiveWriteError(
                path=Path(root),
                context={"stderr": res.stderr.decode("utf-8", errors="replace")},
            )


class JailSandboxClient(BaseSandboxClient[JailSandboxClientOptions | None]):
    """Creates SDK sandbox sessions that are jail sessions (see the module's doc).

    The jail binary is found at construction (`jail=`, `$JAIL_BIN`, PATH): a missing one
    raises :class:`jail_sandbox.JailNotFound` before any run. `outcomes` collects, in order,
    how each session this client started ended (`jail session stop --json`: its `cow_run`
    and its report, whose `execs` say which command changed what), also for sessions the Runner created and cleaned up itself.

    A serialized session state is data, not policy: `resume()` takes a state's jail flags only
    when this client created them; a state from elsewhere gets the flags and the workspace of
    `resume_options` (its `workspace` is required: the state's manifest root is not taken),
    and without them is refused. `delete()` removes only temporary workspaces this client
    made.

    `max_output_bytes` bounds each of a command's stdout and stderr (first and last half kept,
    a marker between; None: no bound); `max_file_bytes` bounds a file read or a snapshot,
    which past it raises `WorkspaceArchiveReadError` rather than come back cut.
    """

    backend_id = "jail"
    supports_default_options = True
    # `env`, when given, is the whole environment the sessions' commands start from (PATH
    # included); jail still removes secrets from it. By default, this process's.

    def __init__(
        self,
        *,
        jail: str | os.PathLike[str] | None = None,
        env: dict[str, str] | None = None,
        resume_options: JailSandboxClientOptions | None = None,
        instrumentation: Instrumentation | None = None,
        dependencies: Dependencies | None = None,
        max_output_bytes: int | None = DEFAULT_MAX_OUTPUT,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    ) -> None:
        self.jail = find_jail(jail)
        for name, value, optional in (
            ("max_output_bytes", max_output_bytes, True),
            ("max_file_bytes", max_file_bytes, False),
        ):
            if value is None and optional:
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive number of bytes, not {value!r}")
        self.max_output_bytes = max_output_bytes
        self.max_file_bytes = max_file_bytes
        self._env = dict(env) if env is not None else None
        self._resume_options = resume_options
        self._instrumentation = instrumentation if instrumentation is not None else Instrumentation()
        self._dependencies = dependencies
        self._created: dict[str, list[str]] = {}
        self._owned_roots: set[str] = set()
        self.outcomes: list[Outcome] = []

    def _session(
        self, state: JailSandboxSessionState, *, may_attach: bool = True
    ) -> JailSandboxSession:
        return JailSandboxSession(
            state=state,
            jail=self.jail,
            env=self._env,
            on_outcome=self.outcomes.append,
            may_attach=may_attach,
            max_output_bytes=self.max_output_bytes,
            max_file_bytes=self.max_file_bytes,
        )

    @staticmethod
    def _flags(
        options: JailSandboxClientOptions, manifest: Manifest, workspace: str
    ) -> list[str]:
        """jail's flags for these options."""
        ro = list(options.ro_paths)
        rw = list(options.rw_paths)
        for grant in manifest.extra_path_grants:
            if grant.host_path is not None:
                raise ValueError(
                    "JailSandboxClient shows host paths at their own path: omit host_path "
                    f"for {grant.path!r}"
                )
            (ro if grant.read_only else rw).append(grant.path)
        cow: list[str] = []
        {"ro": ro, "rw": rw, "cow": cow}[options.mode].insert(0, workspace)
        return JailSession.build_args(
            ro=ro,
            rw=rw,
            cow=cow,
            profile=options.profile,
            require=options.require,
            timeout=options.session_timeout,
            idle_timeout=options.idle_timeout,
            report=options.report,
            extra_args=options.extra_args,
        )

    async def create(
        self,
        *,
        snapshot: SnapshotSpec | SnapshotBase | None = None,
        manifest: Manifest | None = None,
        options: JailSandboxClientOptions | None = None,
    ) -> SandboxSession:
        options = options if options is not None else JailSandboxClientOptions()
        manifest = manifest if manifest is not None else Manifest()
        self._validate_manifest_for_create(manifest)
        _refuse_accounts(manifest)

        workspace = options.workspace
        if workspace is None and manifest.root != _DEFAULT_MANIFEST_ROOT:
            workspace = manifest.root
        owned = workspace is None
        if workspace is None:
            workspace = await asyncio.to_thread(tempfile.mkdtemp, prefix="jail-sandbox-")
        workspace = os.path.realpath(workspace)
        if not os.path.isdir(workspace):
            raise ValueError(f"the workspace {workspace} is not a directory")
        if owned:
            self._owned_roots.add(workspace)
        args = self._flags(options, manifest, workspace)
        manifest = manifest.model_copy(update={"root": workspace}, deep=True)
        session_id = uuid.uuid4()
        state = JailSandboxSessionState(
            session_id=session_id,
            manifest=manifest,
            snapshot=resolve_snapshot(snapshot, str(session_id)),
            jail_name=f"oa-{secrets.token_hex(6)}",
            jail_args=args,
            workspace_root_owned=owned,
        )
        self._created[state.jail_name] = list(args)
        return self._wrap_session(self._session(state), instrumentation=self._instrumentation)

    async def delete(self, session: SandboxSession) -> SandboxSession:
        inner = session._inner
        if not isinstance(inner, JailSandboxSession):
            raise TypeError("JailSandboxClient.delete expects a JailSandboxSession")
        await inner._stop_jail()
        root = inner.state.manifest.root
        if inner.state.workspace_root_owned and root in self._owned_roots:
            await asyncio.to_thread(shutil.rmtree, root, True)
            self._owned_roots.discard(root)
        return session

    async def resume(self, state: SandboxSessionState) -> SandboxSession:
        if not isinstance(state, JailSandboxSessionState):
            raise TypeError("JailSandboxClient.resume expects a JailSandboxSessionState")
        state.assert_path_grants_rebound()
        _refuse_accounts(state.manifest)
        own = self._created.get(state.jail_name) == state.jail_args
        if not own:
            if self._resume_options is None:
                raise ValueError(
                    "a session state this client did not create names its own jail flags: "
                    "give JailSandboxClient(resume_options=...) to resume it"
                )
            # Which host directory becomes the workspace (given --rw, emptied and refilled
            # from the snapshot on resume) is policy too: resume_options names it, never the
            # state's manifest root.
            if self._resume_options.workspace is None:
                raise ValueError(
                    "resuming a session state this client did not create needs "
                    "resume_options.workspace (the state's own root is not taken)"
                )
            workspace = os.path.realpath(self._resume_options.workspace)
            if not os.path.isdir(workspace):
                raise ValueError(f"the workspace {workspace} is not a directory")
            manifest = state.manifest.model_copy(update={"root": workspace}, deep=True)
            args = self._flags(self._resume_options, manifest, workspace)
            state = state.model_copy(
                update={"jail_args": args, "workspace_root_owned": False, "manifest": manifest}
            )
        # A foreign state never attaches to a live session of its name (whoever started it,
        # with whatever flags): it starts its own, and a live one of the name makes that fail.
        return self._wrap_session(
            self._session(state, may_attach=own), instrumentation=self._instrumentation
        )

    def deserialize_session_state(self, payload: dict[str, object]) -> SandboxSessionState:
        return self._deserialize_session_state_payload(payload, JailSandboxSessionState)


def _refuse_accounts(manifest: Manifest) -> None:
    if manifest.users or manifest.groups:
        raise ValueError(
            "JailSandboxClient does not provision manifest users or groups: it would run "
            "useradd on the host's files, and a jail cannot gain the privileges to"
        )


def _attach_if_alive(jail: str, state: JailSandboxSessionState) -> JailSession | None:
    """A resumed state's jail session, when it still runs (proven confined again)."""
    try:
        return JailSession.attach(
            state.jail_name, jail=jail, verify=True, require=_required(state.jail_args)
        )
    except SessionGone:
        return None


def _required(args: list[str]) -> str | None:
    """The level the session's flags require (`--require LEVEL`), if any."""
    required = None
    for i, word in enumerate(args):
        if word == "--require" and i + 1 < len(args):
            required = args[i + 1]
        elif word.startswith("--require="):
            required = word.split("=", 1)[1]
    return required
