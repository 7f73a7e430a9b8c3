"""The sandbox client through the Agents SDK's own code path: Runner.run, a SandboxAgent, the
SDK's shell and apply_patch tools, and a scripted model (a custom ModelProvider) that issues
the tool calls. Offline: no model API is reached."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from agents import Runner
from agents.run import RunConfig
from agents.sandbox import Manifest, SandboxAgent, SandboxRunConfig
from agents.sandbox.entries import Dir, File
from conftest import jail_cli, session_names, wait_gone

from jail_sandbox import JailNotFound, NotConfined
from jail_sandbox.agents_sdk import (
    PINNED_AGENTS_VERSION,
    JailSandboxClient,
    JailSandboxClientOptions,
    JailSandboxSession,
)
from jail_sandbox.scripted import Exec, Patch, Say, ScriptedModel, ScriptedProvider


def run_agent(client, options, steps, *, manifest=None, session=None):
    model = ScriptedModel(steps=list(steps))
    agent = SandboxAgent(
        name="jail-test", instructions="Use the tools.", model="scripted",
        default_manifest=manifest,
    )
    sandbox = SandboxRunConfig(client=client, options=options, session=session)
    config = RunConfig(
        model_provider=ScriptedProvider(model), tracing_disabled=True, sandbox=sandbox
    )
    result = asyncio.run(Runner.run(agent, "go", run_config=config))
    return model, result


def shell(output: str) -> tuple[int | None, str]:
    """The exit code and the output the SDK's exec_command tool handed the model."""
    m = re.search(r"^Process exited with code (-?\d+)$", output, re.M)
    body = output.split("\nOutput:\n", 1)[1] if "\nOutput:\n" in output else output
    return (int(m.group(1)) if m else None), body


def add_file(path: str, *lines: str) -> str:
    body = "".join(f"+{line}\n" for line in lines)
    return f"*** Begin Patch\n*** Add File: {path}\n{body}*** End Patch\n"


def update_file(path: str, old: str, new: str) -> str:
    return f"*** Begin Patch\n*** Update File: {path}\n@@\n-{old}\n+{new}\n*** End Patch\n"


def test_pinned_sdk_version():
    from importlib.metadata import version

    assert version("openai-agents") == PINNED_AGENTS_VERSION


def test_read_only_project(jail_bin, project):
    client = JailSandboxClient(jail=jail_bin)
    options = JailSandboxClientOptions(workspace=str(project), mode="ro")
    model, result = run_agent(client, options, [
        # two calls at once: the SDK runs them in parallel, both in the one session
        [Exec(f"{jail_bin} status", "status"), Exec("echo changed > README.md", "write")],
        [Patch(add_file("NEW.txt", "new"), "patch-add")],
        [Patch(update_file("README.md", "hello", "patched"), "patch-update")],
        [Exec("cat README.md; exit 3", "read")],
        Say("done"),
    ])
    assert result.final_output == "done"
    code, out = shell(model.outputs["status"])
    assert code == 0 and "inside a jail: level full" in out
    code, out = shell(model.outputs["write"])
    assert code == 2 and "Read-only file system" in out
    assert "Read-only file system" in model.outputs["patch-add"]
    assert "Read-only file system" in model.outputs["patch-update"]
    code, out = shell(model.outputs["read"])
    assert (code, out.strip()) == (3, "hello")
    assert (project / "README.md").read_text() == "hello\n"
    assert not (project / "NEW.txt").exists()
    [outcome] = client.outcomes
    assert (outcome.status, outcome.level, outcome.gaps) == ("stopped", "full", [])
    assert outcome.name not in session_names(jail_bin)


def test_cow_session_edits_come_back_as_a_jail_run(jail_bin, project):
    client = JailSandboxClient(jail=jail_bin)
    options = JailSandboxClientOptions(workspace=str(project), mode="cow")
    model, _ = run_agent(client, options, [
        [Exec("echo changed > README.md", "write")],
        [Patch(add_file("src/new.py", "print('new')"), "patch")],
        [Patch(update_file("src/app.py", "print('app')", "print('patched')"), "patch2")],
        [Exec("cat README.md src/new.py src/app.py", "read")],
        Say("done"),
    ])
    assert shell(model.outputs["write"])[0] == 0
    assert "Read-only" not in model.outputs["patch"]
    code, out = shell(model.outputs["read"])
    assert code == 0 and out.split() == ["changed", "print('new')print('patched')"]
    # nothing reached the project: the writes wait in the layer, as one run
    assert (project / "README.md").read_text() == "hello\n"
    assert not (project / "src" / "new.py").exists()
    [outcome] = client.outcomes
    run_id = outcome.cow_run  # session stop --json's own: the run the layer waits as
    assert run_id is not None and outcome.cow_run_ids == [run_id]
    # the report's execs say which tool call changed what
    wrote = {e["command"][-1]: sorted(Path(p).name for p in e["wrote"]) for e in outcome.execs
             if e["wrote"]}
    assert wrote["echo changed > README.md"] == ["README.md"], outcome.execs
    assert ["new.py"] in wrote.values() and ["app.py"] in wrote.values(), wrote
    assert all(e["wrote"] == [] for e in outcome.execs if e["command"][:1] == ["cat"])
    diff = jail_cli(jail_bin, "diff", run_id)
    assert diff.returncode == 0, diff.stderr
    assert "+changed" in diff.stdout and "src/new.py" in diff.stdout
    assert "+print('patched')" in diff.stdout
    applied = jail_cli(jail_bin, "apply", run_id, cwd=project)
    assert applied.returncode == 0, applied.stderr
    assert (project / "README.md").read_text() == "changed\n"
    assert (project / "src" / "new.py").read_text().rstrip("\n") == "print('new')"


def test_timeout_stops_the_tree(jail_bin, project):
    client = JailSandboxClient(jail=jail_bin)
    options = JailSandboxClientOptions(workspace=str(project), mode="ro")
    model, _ = run_agent(client, options, [
        [Exec("sleep 987.51 & sleep 987.52 & wait; echo never", "slow", yield_time_ms=1000)],
        [Exec("echo alive", "after")],
        Say("done"),
    ])
    assert "Command timed out after 1.000 seconds." in model.outputs["slow"]
    assert "never" not in model.outputs["slow"]
    assert wait_gone("sleep 987.5") == []
    assert shell(model.outputs["after"]) == (0, "alive\n")


def test_a_zero_timeout_is_a_timeout_and_runs_nothing(jail_bin, project):
    """The shell tool takes yield_time_ms >= 0 from the model and passes it on as the exec's
    timeout: 0 is a timeout as the SDK's own clients give it (`Command timed out`), not a
    ValueError out of the tool; the command is never started."""
    client = JailSandboxClient(jail=jail_bin)
    options = JailSandboxClientOptions(workspace=str(project), mode="rw")
    model, result = run_agent(client, options, [
        [Exec("touch ran", "zero", yield_time_ms=0)],
        [Exec("echo after", "after")],
        Say("done"),
    ])
    assert "Command timed out after 0.000 seconds." in model.outputs["zero"], model.outputs
    assert shell(model.outputs["after"]) == (0, "after\n")
    assert result.final_output == "done"
    assert not (project / "ran").exists()


def test_exit_124_is_not_a_timeout_and_the_outcome_has_no_run(jail_bin, project):
    client = JailSandboxClient(jail=jail_bin)
    options = JailSandboxClientOptions(workspace=str(project), mode="cow")
    model, _ = run_agent(client, options, [
        [Exec("echo 'Command timed out'; exit 124", "own", yield_time_ms=20000)],
        Say("done"),
    ])
    assert shell(model.outputs["own"]) == (124, "Command timed out\n"), model.outputs["own"]
    [outcome] = client.outcomes
    assert outcome.cow_run is None and outcome.cow_run_ids == []
    assert any(e["exit_code"] == 124 for e in outcome.execs), outcome.execs


def test_manifest_environment_reaches_the_command_not_the_client(jail_bin, project):
    """A manifest's (or a resumed state's) variables are the command's: XDG_RUNTIME_DIR,
    HOME or LD_PRELOAD never steer the jail exec client on this side (here the client would
    look for the session in the workspace's run/ and not find it)."""
    runtime = project / "run"
    (runtime / "jail-sessions").mkdir(parents=True)
    runtime.chmod(0o700)
    (runtime / "jail-sessions").chmod(0o700)
    manifest = Manifest(environment={"value": {
        "XDG_RUNTIME_DIR": str(runtime), "HOME": str(project)}})
    client = JailSandboxClient(jail=jail_bin)
    options = JailSandboxClientOptions(workspace=str(project), mode="rw")
    model, _ = run_agent(client, options, [
        [Exec('printf "%s|%s" "$XDG_RUNTIME_DIR" "$HOME"', "env")],
        Say("done"),
    ], manifest=manifest)
    code, out = shell(model.outputs["env"])
    assert (code, out) == (0, f"{runtime}|{project}"), model.outputs["env"]


def test_every_tool_call_runs_confined(jail_bin, project, monkeypatch):
    """Every process the orchestrator starts during the run is jail itself (the session's
    start and its policy's --dry-run, list, stop, one `jail exec` per operation); each
    command proves from inside, with `jail status`, that it runs in a jail."""
    started: list[list[str]] = []
    real_init = subprocess.Popen.__init__

    def spy(self, args, *a, **kw):
        started.append([str(x) for x in args] if not isinstance(args, str) else [args])
        return real_init(self, args, *a, **kw)

    monkeypatch.setattr(subprocess.Popen, "__init__", spy)
    client = JailSandboxClient(jail=jail_bin)
    options = JailSandboxClientOptions(workspace=str(project), mode="rw")
    check = f"{jail_bin} status >/dev/null && echo confined"
    model, _ = run_agent(client, options, [
        [Exec(f"{check} 1", "c1"), Exec(f"{check} 2", "c2")],
        [Patch(add_file("out.txt", "written"), "patch")],
        [Exec(f"{check} 3 && cat out.txt", "c3")],
        [Exec(f"{check} 4", "c4", workdir="src")],
        Say("done"),
    ])
    for n in (1, 2, 4):
        assert shell(model.outputs[f"c{n}"]) == (0, f"confined {n}\n")
    # (the SDK's Add File writes no newline after the last line)
    assert shell(model.outputs["c3"]) == (0, "confined 3\nwritten")
    assert (project / "out.txt").read_text() == "written"
    assert started, "nothing was started"
    assert {argv[0] for argv in started} == {jail_bin}, started
    execs = [argv for argv in started if argv[1] == "exec"]
    [name] = {argv[2] for argv in execs}
    assert name == client.outcomes[0].name
    # besides: the policy's --dry-run for the session's flags, which runs nothing
    others = [argv for argv in started if argv[1] not in ("exec", "session")]
    assert others and all(argv[-3:] == ["--dry-run", "--", "true"] for argv in others), others
    # the SDK's own file operations went through jail exec too (apply_patch: mkdir, write)
    assert any("cat > \"$1\"" in " ".join(argv) for argv in execs)


def test_manifest_is_staged_inside_the_jail(jail_bin, project):
    manifest = Manifest(entries={
        "notes/todo.txt": File(content=b"staged\n"),
        "cache": Dir(),
    })
    client = JailSandboxClient(jail=jail_bin)
    options = JailSandboxClientOptions(workspace=str(project), mode="rw")
    model, _ = run_agent(client, options, [
        [Exec("cat notes/todo.txt && test -d cache && echo dir", "read")],
        Say("done"),
    ], manifest=manifest)
    assert shell(model.outputs["read"]) == (0, "staged\ndir\n")
    assert (project / "notes" / "todo.txt").read_text() == "staged\n"


def test_manifest_into_a_read_only_project_fails_before_any_call(jail_bin, project):
    manifest = Manifest(entries={"notes/todo.txt": File(content=b"staged\n")})
    client = JailSandboxClient(jail=jail_bin)
    options = JailSandboxClientOptions(workspace=str(project), mode="ro")
    with pytest.raises(Exception) as e:
        run_agent(client, options, [[Exec("touch ran", "c")], Say("done")], manifest=manifest)
    assert "Read-only file system" in _chain(e.value)
    assert not (project / "notes").exists() and not (project / "ran").exists()
    [outcome] = client.outcomes  # the half-started session was stopped
    assert outcome.name not in session_names(jail_bin)


def test_live_session_owned_by_the_orchestrator(jail_bin, project):
    client = JailSandboxClient(jail=jail_bin)

    async def scenario():
        session = await client.create(
            options=JailSandboxClientOptions(workspace=str(project), mode="rw")
        )
        async with session:
            inner = session._inner
            assert isinstance(inner, JailSandboxSession)
            assert inner.state.jail_name in session_names(jail_bin)
            for steps in (
                [[Exec("echo first > state.txt", "w")], Say("one")],
                [[Exec("cat state.txt", "r")], Say("two")],
            ):
                model = ScriptedModel(steps=steps)
                agent = SandboxAgent(name="live", instructions="x", model="scripted")
                config = RunConfig(
                    model_provider=ScriptedProvider(model), tracing_disabled=True,
                    sandbox=SandboxRunConfig(session=session),
                )
                await Runner.run(agent, "go", run_config=config)
            # the second run saw what the first one left: one session across runs
            assert shell(model.outputs["r"]) == (0, "first\n")
        return inner

    inner = asyncio.run(scenario())
    assert inner.outcome is not None and inner.outcome.status == "stopped"
    assert inner.state.jail_name not in session_names(jail_bin)


# -- fail closed ---------------------------------------------------------------------------


def _chain(error: BaseException) -> str:
    parts = []
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        parts.append(f"{type(error).__name__}: {error} {getattr(error, 'context', '')}")
        error = error.__cause__ or error.__context__
    return "\n".join(parts)


def test_missing_jail_fails_at_construction(tmp_path):
    with pytest.raises(JailNotFound):
        JailSandboxClient(jail=str(tmp_path / "no-jail"))


def test_unproven_confinement_fails_the_run_before_any_call(jail_bin, project):
    client = JailSandboxClient(jail=jail_bin)
    options = JailSandboxClientOptions(
        workspace=str(project), mode="rw", extra_args=("--allow-userns",)
    )
    with pytest.raises(Exception) as e:
        run_agent(client, options, [[Exec("touch ran", "c")], Say("done")])
    chain = _chain(e.value)
    assert "NotConfined" in chain and "exited 2" in chain, chain
    assert not (project / "ran").exists()
    [name] = re.findall(r"jail status in session (oa-[0-9a-f]+) exited 2", chain)[:1]
    assert name not in session_names(jail_bin)  # stopped again at once
    assert isinstance(_find(e.value, NotConfined), NotConfined)


def _find(error, kind):
    while error is not None:
        if isinstance(error, kind):
            return error
        error = error.__cause__ or error.__context__
    return None


def test_required_level_unmet_fails_the_run(jail_bin, project, scratch):
    """The orchestrator, run where jail cannot reach `full` (inside another jail), gets an
    error from Runner.run; the scripted tool call never runs."""
    runtime = scratch / "runtime"
    runtime.mkdir(mode=0o700)
    marker = runtime / "ran"
    code = textwrap.dedent(
        f"""
        import asyncio, sys
        from agents import Runner
        from agents.run import RunConfig
        from agents.sandbox import SandboxAgent, SandboxRunConfig
        from jail_sandbox.agents_sdk import JailSandboxClient, JailSandboxClientOptions
        from jail_sandbox.scripted import Exec, Say, ScriptedModel, ScriptedProvider
        model = ScriptedModel(steps=[[Exec("touch {marker}", "c")], Say("done")])
        config = RunConfig(
            model_provider=ScriptedProvider(model), tracing_disabled=True,
            sandbox=SandboxRunConfig(
                client=JailSandboxClient(),
                options=JailSandboxClientOptions(workspace={str(project)!r}, mode="ro"),
            ),
        )
        agent = SandboxAgent(name="nested", instructions="x", model="scripted")
        try:
            asyncio.run(Runner.run(agent, "go", run_config=config))
        except Exception as e:
            chain = []
            while e is not None:
                chain.append(f"{{type(e).__name__}}: {{e}}")
                e = e.__cause__
            print("REFUSED", model.turns, " | ".join(chain))
            sys.exit(0)
        print("RAN")
        """
    )
    proc = subprocess.run(
        [jail_bin, "--rw", str(runtime), "--", "env", f"XDG_RUNTIME_DIR={runtime}",
         f"JAIL_BIN={jail_bin}", sys.executable, "-c", code],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("REFUSED 0 "), proc.stdout + proc.stderr  # no model turn
    assert "required enforcement level 'full' not met" in proc.stdout
    assert "SessionStartError" in proc.stdout
    assert not marker.exists()


# -- snapshots and resume ------------------------------------------------------------------


def test_snapshot_and_resume_go_through_the_jail(jail_bin, project, scratch):
    """stop() persists the workspace (tar inside the session); a resumed state gets a new
    session whose workspace is restored from it (rm and tar -x inside the new session)."""
    from agents.sandbox.snapshot import LocalSnapshotSpec

    client = JailSandboxClient(jail=jail_bin)
    snaps = scratch / "snapshots"
    snaps.mkdir()

    async def scenario():
        first = await client.create(
            options=JailSandboxClientOptions(workspace=str(project), mode="rw"),
            snapshot=LocalSnapshotSpec(base_path=snaps),
        )
        async with first:
            assert (await first.exec("echo one > a.txt", shell=True)).exit_code == 0
        assert list(snaps.iterdir()), "no snapshot persisted"
        payload = client.serialize_session_state(first.state)
        # the host tree drifts while no session runs; the resumed one restores the snapshot
        (project / "a.txt").write_text("drifted\n")
        (project / "stray.txt").write_text("stray\n")
        second = await client.resume(client.deserialize_session_state(payload))
        async with second:
            assert second._inner.state.jail_name == first._inner.state.jail_name
            r = await second.exec("cat a.txt; ls", shell=True)
            return r.stdout.decode()

    out = asyncio.run(scenario())
    assert out.splitlines()[0] == "one" and "stray.txt" not in out
    assert [o.status for o in client.outcomes] == ["stopped", "stopped"]


def test_hydrate_into_a_read_only_workspace_is_refused_by_the_kernel(jail_bin, project):
    import io
    import tarfile

    client = JailSandboxClient(jail=jail_bin)
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        info = tarfile.TarInfo("injected.txt")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"bad"))
    data.seek(0)

    async def scenario():
        session = await client.create(
            options=JailSandboxClientOptions(workspace=str(project), mode="ro")
        )
        async with session:
            with pytest.raises(Exception) as e:
                await session._inner.hydrate_workspace(data)
            return _chain(e.value)

    assert "Read-only file system" in asyncio.run(scenario())
    assert not (project / "injected.txt").exists()


def test_a_foreign_state_cannot_choose_its_jail_flags(jail_bin, project):
    """A serialized state is data: a client that did not create it refuses its flags, or
    replaces them with its own resume_options."""
    maker = JailSandboxClient(jail=jail_bin)

    async def scenario():
        session = await maker.create(
            options=JailSandboxClientOptions(workspace=str(project), mode="ro")
        )
        payload = maker.serialize_session_state(session.state)
        payload["jail_args"] = ["--rw", str(project)]  # tampered
        other = JailSandboxClient(jail=jail_bin)
        with pytest.raises(ValueError, match="resume_options"):
            await other.resume(other.deserialize_session_state(payload))
        strict = JailSandboxClient(
            jail=jail_bin,
            resume_options=JailSandboxClientOptions(workspace=str(project), mode="ro"),
        )
        resumed = await strict.resume(strict.deserialize_session_state(payload))
        async with resumed:
            r = await resumed.exec("echo x > README.md", shell=True)
        return r

    r = asyncio.run(scenario())
    assert r.exit_code == 2 and b"Read-only file system" in r.stderr
    assert (project / "README.md").read_text() == "hello\n"


def test_a_background_process_does_not_hold_the_tool_call(jail_bin, project):
    import time

    client = JailSandboxClient(jail=jail_bin)
    options = JailSandboxClientOptions(workspace=str(project), mode="ro")
    began = time.monotonic()
    model, _ = run_agent(client, options, [
        [Exec("sleep 987.71 & echo started", "bg")],
        [Exec("echo next", "next")],
        Say("done"),
    ])
    assert time.monotonic() - began < 30
    assert shell(model.outputs["bg"]) == (0, "started\n")
    assert shell(model.outputs["next"]) == (0, "next\n")
    assert wait_gone("sleep 987.71") == []  # the session's stop ended it


def test_a_foreign_state_cannot_choose_its_workspace(jail_bin, project, scratch):
    """The state's manifest root decides which host directory the resumed session gets as
    the workspace (given `--rw` by the resume options, emptied and refilled from the
    snapshot): a client that did not create the state takes it from resume_options only."""
    victim = scratch / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("mine\n")
    maker = JailSandboxClient(jail=jail_bin)

    async def scenario():
        session = await maker.create(
            options=JailSandboxClientOptions(workspace=str(project), mode="ro")
        )
        payload = maker.serialize_session_state(session.state)
        payload["manifest"]["root"] = str(victim)  # tampered
        loose = JailSandboxClient(jail=jail_bin, resume_options=JailSandboxClientOptions(mode="rw"))
        with pytest.raises(ValueError, match="resume_options.workspace"):
            await loose.resume(loose.deserialize_session_state(payload))
        strict = JailSandboxClient(
            jail=jail_bin,
            resume_options=JailSandboxClientOptions(workspace=str(project), mode="rw"),
        )
        resumed = await strict.resume(strict.deserialize_session_state(payload))
        assert resumed._inner.state.manifest.root == str(project)
        assert str(victim) not in resumed._inner.state.jail_args
        async with resumed:
            r = await resumed.exec("pwd; echo x > written.txt", shell=True)
        return r

    r = asyncio.run(scenario())
    assert r.exit_code == 0 and r.stdout.decode().splitlines()[0] == str(project)
    assert (project / "written.txt").exists() and not (victim / "written.txt").exists()
    assert (victim / "keep.txt").read_text() == "mine\n"
