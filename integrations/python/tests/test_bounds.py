"""What a sandboxed command prints or leaves in the workspace cannot exhaust the orchestrator:
an exec's output is bounded (first and last half kept, a marker between), a file read or a
snapshot is bounded and never truncated, and no file operation waits without end."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import wait_gone

from jail_sandbox import DEFAULT_MAX_OUTPUT, JailSession
from jail_sandbox.session import truncation_marker

# The orchestrator runs in a child whose address space is capped: without a bound on what
# it keeps, the output below ends it with MemoryError (or a peak far above the cap here).
_AS_CAP = 2 * 1024 * 1024 * 1024
_PEAK_RSS_MAX_KB = 400 * 1024


def _bounded_child(body: str, jail_bin: str, project: Path) -> dict:
    code = textwrap.dedent(
        f"""
        import json, resource, sys, time
        resource.setrlimit(resource.RLIMIT_AS, ({_AS_CAP}, {_AS_CAP}))
        JAIL, PROJECT = {jail_bin!r}, {str(project)!r}
        out = {{}}
        try:
        """
    ) + textwrap.indent(textwrap.dedent(body), "    ") + textwrap.dedent(
        """
        except MemoryError:
            out["error"] = "MemoryError"
        out["peak_rss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(json.dumps(out))
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def test_a_command_printing_a_gigabyte_does_not_exhaust_the_orchestrator(jail_bin, project):
    out = _bounded_child(
        """
        from jail_sandbox import JailSession
        with JailSession.start(cwd=PROJECT, ro=[PROJECT], jail=JAIL) as s:
            r = s.exec(["sh", "-c", "echo first; head -c 1000000000 /dev/zero; echo; echo last"])
            out.update(code=r.exit_code, length=len(r.stdout), dropped=r.stdout_truncated,
                       head=r.stdout[:6].decode(), tail=r.stdout[-5:].decode(),
                       marked=b"bytes of output truncated" in r.stdout)
        """,
        jail_bin, project,
    )
    assert "error" not in out, out
    assert out["peak_rss_kb"] < _PEAK_RSS_MAX_KB, out
    assert (out["code"], out["head"], out["tail"], out["marked"]) == (0, "first\n", "last\n", True)
    total = len("first\n") + 1_000_000_000 + len("\nlast\n")
    assert out["dropped"] == total - DEFAULT_MAX_OUTPUT
    assert out["length"] == DEFAULT_MAX_OUTPUT + len(truncation_marker(out["dropped"]))


def test_the_bound_keeps_the_first_and_last_half_with_a_marker(jail_bin, project):
    with JailSession.start(cwd=project, ro=[project], jail=jail_bin) as s:
        r = s.exec(["sh", "-c", "printf 0123456789; printf abcdefghij >&2"], max_output=4)
        assert r.stdout == b"01" + truncation_marker(6) + b"89" and r.stdout_truncated == 6
        assert r.stderr == b"ab" + truncation_marker(6) + b"ij" and r.stderr_truncated == 6
        assert r.truncated and r.exit_code == 0 and not r.output_overflowed
        # up to the bound, nothing changes; None is no bound
        r = s.exec(["sh", "-c", "printf 0123456789"], max_output=10)
        assert (r.stdout, r.stdout_truncated, r.truncated) == (b"0123456789", 0, False)
        big = s.exec(["head", "-c", "3000000", "/dev/zero"], max_output=None)
        assert len(big.stdout) == 3_000_000 and not big.truncated
        # the marker is not mistaken for output of the command's own
        r = asyncio.run(s.aexec(["seq", "1", "100000"], max_output=1000))
        assert r.stdout.startswith(b"1\n2\n") and r.stdout.endswith(b"99999\n100000\n")
        assert r.stdout_truncated == len(b"".join(b"%d\n" % i for i in range(1, 100001))) - 1000
        with pytest.raises(ValueError):
            s.exec(["true"], max_output=-1)


def test_endless_output_with_a_timeout_ends_the_whole_tree(jail_bin, project):
    with JailSession.start(cwd=project, ro=[project], jail=jail_bin) as s:
        began = time.monotonic()
        r = s.exec(["sh", "-c", "sleep 987.81 & yes; wait"], timeout=1, max_output=1 << 20)
        assert r.timed_out and r.exit_code == 124
        assert len(r.stdout) <= (1 << 20) + 100 and r.stdout_truncated > 0
        assert time.monotonic() - began < 15
        assert wait_gone("sleep 987.81") == []
        r = asyncio.run(s.aexec(["sh", "-c", "sleep 987.82 & yes"], timeout=1, max_output=1024))
        assert r.timed_out and len(r.stdout) <= 1024 + 100
        assert wait_gone("sleep 987.82") == []


def test_end_on_overflow_ends_the_command_even_one_that_ignores_sigterm(jail_bin, project):
    with JailSession.start(cwd=project, ro=[project], jail=jail_bin) as s:
        began = time.monotonic()
        r = s.exec(["yes"], max_output=1 << 16, end_on_overflow=True)
        assert r.output_overflowed and r.truncated and r.exit_code != 0
        r = asyncio.run(s.aexec(["sh", "-c", "trap '' TERM; yes"], max_output=1 << 16,
                                end_on_overflow=True))
        assert r.output_overflowed and r.exit_code != 0
        assert time.monotonic() - began < 20
        assert s.exec(["echo", "still"]).stdout == b"still\n"


# -- the Agents SDK client ------------------------------------------------------------------


def test_the_shell_tool_sees_a_bounded_output_with_the_marker(jail_bin, project):
    from test_agents_sdk import run_agent, shell

    from jail_sandbox.agents_sdk import JailSandboxClient, JailSandboxClientOptions
    from jail_sandbox.scripted import Exec, Say

    client = JailSandboxClient(jail=jail_bin, max_output_bytes=4096)
    options = JailSandboxClientOptions(workspace=str(project), mode="ro")
    model, _ = run_agent(client, options, [
        [Exec("echo first; head -c 50000000 /dev/zero | tr '\\0' x; echo; echo last", "big")],
        Say("done"),
    ])
    code, out = shell(model.outputs["big"])
    assert code == 0 and out.startswith("first\n") and out.endswith("last\n")
    assert "bytes of output truncated" in out and len(out) < 5000


def _sdk_session(jail_bin: str, project: Path, **client_kw):
    from jail_sandbox.agents_sdk import JailSandboxClient, JailSandboxClientOptions

    client = JailSandboxClient(jail=jail_bin, **client_kw)
    return client, client.create(options=JailSandboxClientOptions(workspace=str(project),
                                                                  mode="rw"))


def test_reading_a_link_to_dev_zero_is_bounded_and_an_error(jail_bin, project):
    """A command can leave `README.md -> /dev/zero`: the SDK's next read of it (apply_patch)
    must end at the bound with an error, not fill the orchestrator's memory for 60 s."""
    (project / "zero").symlink_to("/dev/zero")
    out = _bounded_child(
        """
        import asyncio
        from pathlib import Path
        from agents.sandbox.errors import WorkspaceArchiveReadError
        from jail_sandbox.agents_sdk import JailSandboxClient, JailSandboxClientOptions

        async def main():
            client = JailSandboxClient(jail=JAIL, max_file_bytes=8 << 20)
            session = await client.create(
                options=JailSandboxClientOptions(workspace=PROJECT, mode="rw"))
            async with session:
                began = time.monotonic()
                try:
                    await session._inner.read(Path("zero"))
                    out["read"] = "returned"
                except WorkspaceArchiveReadError as e:
                    out["read"] = e.context.get("reason")
                out["seconds"] = time.monotonic() - began
                data = await session._inner.read(Path("README.md"))
                out["readme"] = data.read().decode()
                out["bounded"] = (await session._inner.read_bounded(
                    Path("README.md"), max_bytes=3)).decode()

        asyncio.run(main())
        """,
        jail_bin, project,
    )
    assert "error" not in out, out
    assert out["read"] == "file_too_large", out
    assert out["seconds"] < 20 and out["peak_rss_kb"] < _PEAK_RSS_MAX_KB, out
    assert (out["readme"], out["bounded"]) == ("hello\n", "hel")


def test_a_read_larger_than_the_output_bound_is_whole(jail_bin, project):
    """Data is never cut by the command output bound: a file between the two reads whole."""
    (project / "big.bin").write_bytes(bytes(range(256)) * 40_000)  # 10 MB

    async def scenario():
        client, creating = _sdk_session(jail_bin, project, max_output_bytes=1 << 20)
        session = await creating
        async with session:
            whole = (await session._inner.read(Path("big.bin"))).read()
            prefix = await session._inner.read_bounded(Path("big.bin"), max_bytes=5_000_000)
            return whole, prefix

    whole, prefix = asyncio.run(scenario())
    assert whole == (project / "big.bin").read_bytes()
    assert prefix == whole[:5_000_000]


def test_a_snapshot_larger_than_the_bound_is_refused(jail_bin, project):
    """A sparse file makes a huge archive from a small workspace: persisting stops at the
    bound with an error (never a truncated archive that a resume would restore)."""
    from agents.sandbox.errors import WorkspaceArchiveReadError

    async def scenario():
        client, creating = _sdk_session(jail_bin, project, max_file_bytes=4 << 20)
        session = await creating
        async with session:
            made = await session.exec("truncate -s 100G sparse", shell=True)
            assert made.exit_code == 0, made.stderr
            began = time.monotonic()
            with pytest.raises(WorkspaceArchiveReadError) as e:
                await session._inner.persist_workspace()
            assert time.monotonic() - began < 20
            assert e.value.context["reason"] == "workspace_too_large"
            await session.exec("rm sparse", shell=True)
            archive = (await session._inner.persist_workspace()).read()
            assert len(archive) > 0
        return client

    asyncio.run(scenario())


def test_a_write_onto_a_fifo_does_not_hang(jail_bin, project, monkeypatch):
    """A command can leave a FIFO where the SDK will write (apply_patch's Add File): opening
    it waits for a reader; the write ends at its timeout with an error instead."""
    from agents.sandbox.errors import WorkspaceArchiveWriteError

    import jail_sandbox.agents_sdk as sdk

    monkeypatch.setattr(sdk, "_WRITE_TIMEOUT_S", 2.0)

    async def scenario():
        import io

        _, creating = _sdk_session(jail_bin, project)
        session = await creating
        async with session:
            assert (await session.exec("mkfifo trap", shell=True)).exit_code == 0
            with pytest.raises(WorkspaceArchiveWriteError) as e:
                await asyncio.wait_for(
                    session._inner.write(Path("trap"), io.BytesIO(b"data")), timeout=30
                )
            assert e.value.context["reason"] == "write_timed_out"
            await session._inner.write(Path("ok.txt"), io.BytesIO(b"data"))

    asyncio.run(scenario())
    assert (project / "ok.txt").read_bytes() == b"data"


def test_client_limits_are_checked():
    from jail_sandbox.agents_sdk import JailSandboxClient

    for bad in ({"max_output_bytes": 0}, {"max_file_bytes": None}, {"max_file_bytes": -1}):
        with pytest.raises(ValueError):
            JailSandboxClient(**bad)


def test_a_snapshot_larger_than_the_bound_is_not_restored(jail_bin, project):
    """What a snapshot store hands back to hydrate_workspace is read up to the bound, not
    whole into memory, and past it refused before anything is extracted."""
    import io

    from agents.sandbox.errors import WorkspaceArchiveWriteError

    class Endless(io.RawIOBase):
        served = 0

        def readable(self):
            return True

        def readinto(self, b):
            n = len(b)
            b[:n] = bytes(n)
            Endless.served += n
            if Endless.served > 64 << 20:
                raise AssertionError("read past the bound")
            return n

    async def scenario():
        _, creating = _sdk_session(jail_bin, project, max_file_bytes=1 << 20)
        session = await creating
        async with session:
            with pytest.raises(WorkspaceArchiveWriteError) as e:
                await session._inner.hydrate_workspace(io.BufferedReader(Endless()))
            assert e.value.context["reason"] == "snapshot_too_large"

    asyncio.run(scenario())
    assert Endless.served <= (1 << 20) + (1 << 17)
