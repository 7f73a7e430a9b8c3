"""What the Python side believes comes from jail on this side, never from what a sandboxed
command prints, exits with or leaves behind; and stop() never takes a refusal for an end."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import textwrap
from pathlib import Path

import pytest
from conftest import jail_cli, session_names

from jail_sandbox import (
    JailError,
    JailSession,
    NotConfined,
    Outcome,
    SessionGone,
    SessionStartError,
)

# -- the outcome ----------------------------------------------------------------------------


def _stop_json(**over):
    raw = {"status": "stopped", "exit_code": 0, "level": "full", "gaps": [], "cow_run": None,
           "report": {"schema": "jail-run-report/1"}}
    raw.update(over)
    return {k: v for k, v in raw.items() if v is not ...}


def test_outcome_parse_takes_cow_run_and_report():
    o = Outcome.parse("s", _stop_json(cow_run="r-1", report={"execs": {"total": 1, "items": [
        {"id": 1, "command": ["true"], "wrote": []}]}}))
    assert o.cow_run == "r-1" and o.cow_run_ids == ["r-1"]
    assert o.execs == [{"id": 1, "command": ["true"], "wrote": []}]


@pytest.mark.parametrize("missing", ["cow_run", "report"])
def test_outcome_without_cow_run_or_report_is_an_error(missing):
    with pytest.raises(JailError, match=f"no {missing}: this jail is too old"):
        Outcome.parse("s", _stop_json(**{missing: ...}))


@pytest.mark.parametrize("bad", [{"cow_run": ""}, {"cow_run": 7}, {"report": None},
                                 {"exit_code": "0"}])
def test_outcome_with_malformed_fields_is_an_error(bad):
    with pytest.raises(JailError):
        Outcome.parse("s", _stop_json(**bad))


def _fake_jail(dir: Path, stop_json: dict | None, listed: list[dict]) -> str:
    """A stand-in for jail: `session stop` prints `stop_json`, `session list` lists `listed`."""
    path = dir / "fake-jail"
    path.write_text(textwrap.dedent(f"""\
        #!/usr/bin/env python3
        import json, sys
        args = sys.argv[1:]
        if args[:2] == ["session", "list"]:
            print(json.dumps({{"sessions": {listed!r}}}))
        elif args[:2] == ["session", "stop"]:
            out = {stop_json!r}
            if out is None:
                sys.stderr.write("jail: refused\\n"); sys.exit(125)
            print(json.dumps(out))
        else:
            sys.exit(125)
        """))
    path.chmod(0o755)
    return str(path)


def test_stop_of_an_older_jail_says_so(tmp_path):
    fake = _fake_jail(tmp_path, _stop_json(cow_run=...), [])
    s = JailSession("fake", jail=fake, cwd="/")
    with pytest.raises(JailError, match="too old"):
        s.stop()
    assert s.outcome is None


def test_an_outcome_while_the_session_is_still_listed_is_not_an_end(tmp_path):
    fake = _fake_jail(tmp_path, _stop_json(), [{"name": "fake", "level": "full"}])
    with pytest.raises(JailError, match="still listed"):
        JailSession("fake", jail=fake, cwd="/").stop()


def test_a_refused_stop_of_a_listed_session_is_a_refusal(tmp_path):
    fake = _fake_jail(tmp_path, None, [{"name": "fake", "level": "full"}])
    with pytest.raises(JailError, match="refused.*may go on") as e:
        JailSession("fake", jail=fake, cwd="/").stop()
    assert not isinstance(e.value, SessionGone)
    # not listed is no proof of an end (a refused caller is shown no session either)
    fake = _fake_jail(tmp_path, None, [])
    with pytest.raises(JailError) as e:
        JailSession("fake", jail=fake, cwd="/").stop()
    assert not isinstance(e.value, SessionGone)


def test_stop_of_no_such_session_is_session_gone(jail_bin):
    with pytest.raises(SessionGone, match="no such session"):
        JailSession("py-never-started", jail=jail_bin, cwd="/").stop()


def test_a_refused_stop_leaves_the_session_running(jail_bin, project):
    """The real refusal: a caller more confined than the session (no_new_privs)."""
    s = JailSession.start(cwd=project, ro=[project], jail=jail_bin)
    try:
        code = (
            "from jail_sandbox import JailSession, JailError, SessionGone\n"
            f"s = JailSession({s.name!r}, jail={jail_bin!r}, cwd='/')\n"
            "try:\n    s.stop(); print('STOPPED')\n"
            "except SessionGone as e: print('GONE', e)\n"
            "except JailError as e: print('REFUSED', e)\n"
        )
        import sys

        proc = subprocess.run(["setpriv", "--no-new-privs", sys.executable, "-c", code],
                              capture_output=True, text=True, timeout=60, check=False)
        assert proc.stdout.startswith("REFUSED"), proc.stdout + proc.stderr
        assert "more confined" in proc.stdout and "may go on" in proc.stdout
        assert s.name in session_names(jail_bin)
        assert s.exec(["echo", "still"]).stdout == b"still\n"
    finally:
        s.stop()
    assert s.outcome.status == "stopped"


def test_attach_checks_the_level_from_outside(tmp_path):
    fake = _fake_jail(tmp_path, None, [{"name": "low", "level": "partial", "cwd": "/"}])
    with pytest.raises(NotConfined, match="'partial', 'full' required"):
        JailSession.attach("low", jail=fake, verify=False)
    assert JailSession.attach("low", jail=fake, verify=False, require="partial").name == "low"


@pytest.mark.parametrize("require,level,ok", [
    ("landlock", "full", True), ("mount", "full", True), ("landlock", "partial", False),
    ("any", "none", True), ("full", "partial", False), ("bogus", "full", False),
])
def test_attach_understands_every_require_value_jail_takes(tmp_path, require, level, ok):
    """`--require` takes full, landlock, mount and any: a session started with one of them
    (an SDK session resumed while it still runs) is attached when the listed level proves it,
    and refused otherwise (a partial level may lack the layer asked for)."""
    fake = _fake_jail(tmp_path, None, [{"name": "s", "level": level, "cwd": "/"}])
    if ok:
        assert JailSession.attach("s", jail=fake, verify=False, require=require).name == "s"
    else:
        with pytest.raises(NotConfined):
            JailSession.attach("s", jail=fake, verify=False, require=require)


@pytest.mark.parametrize("listing", ["not json", "[]", '{"sessions": 3}', "{}"])
def test_a_session_list_not_understood_is_a_jail_error_never_an_end(tmp_path, listing):
    """`alive()` decides whether a 125 is a gone session and whether a stop ended one: an
    answer it cannot read is a JailError (which the SDK client wraps), not a ValueError
    escaping, and never "not listed"."""
    fake = tmp_path / "fake-jail"
    fake.write_text(f"#!/bin/sh\nprintf '%s' '{listing}'\n")
    fake.chmod(0o755)
    s = JailSession("s", jail=str(fake), cwd="/")
    with pytest.raises(JailError, match="printed no session list"):
        s.alive()
    with pytest.raises(JailError):
        JailSession.attach("s", jail=str(fake), verify=False)


def test_a_start_that_does_not_answer_is_a_start_error_and_is_stopped(tmp_path, monkeypatch):
    """A `jail session start` still running at the control timeout: a SessionStartError (not
    subprocess.TimeoutExpired, which the SDK client does not wrap), and a stop for the name,
    since its supervisor may bring the session up after the client is killed."""
    import jail_sandbox.session as session_mod

    log = tmp_path / "log"
    fake = tmp_path / "fake-jail"
    fake.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        echo "$*" >> {log}
        case "$1 $2" in
          "session start") sleep 5 ;;
          "session stop") echo '{{"status": "stopped"}}' ;;
          "session list") echo '{{"sessions": []}}' ;;
          *) echo '{{"policy": {{"rules": []}}}}' ;;
        esac
        """))
    fake.chmod(0o755)
    monkeypatch.setattr(session_mod, "_CONTROL_TIMEOUT_S", 1.0)
    with pytest.raises(SessionStartError, match="did not answer"):
        JailSession.start(name="slow", cwd=tmp_path, jail=str(fake))
    assert "session stop slow --json" in log.read_text()


# -- exit codes -----------------------------------------------------------------------------


def test_exit_124_before_the_timeout_is_the_commands_own(jail_bin, project):
    with JailSession.start(cwd=project, ro=[project], jail=jail_bin) as s:
        r = s.exec(["sh", "-c", "echo 'jail: timed out' >&2; exit 124"], timeout=30)
        assert r.exit_code == 124 and not r.timed_out
        r = s.exec(["sleep", "5"], timeout=1)
        assert r.exit_code == 124 and r.timed_out


def test_exit_125_of_a_command_is_not_a_gone_session(jail_bin, project):
    with JailSession.start(cwd=project, ro=[project], jail=jail_bin) as s:
        r = s.exec(["sh", "-c", "echo 'jail: unknown session' >&2; exit 125"])
        assert r.exit_code == 125
        assert s.exec(["true"]).exit_code == 0


# -- what steers the jail exec client -------------------------------------------------------


def test_variables_that_steer_the_client_stay_out_of_its_environment(jail_bin, project):
    s = JailSession("x", jail=jail_bin, cwd=str(project))
    env = {"LD_PRELOAD": "/w/evil.so", "XDG_RUNTIME_DIR": "/w/run", "HOME": "/w",
           "API_TOKEN": "secret"}
    argv = s.exec_argv(["true"], env=env)
    assert "--env=LD_PRELOAD=/w/evil.so" in argv and "--env=XDG_RUNTIME_DIR=/w/run" in argv
    assert "--env=API_TOKEN" in argv and "secret" not in " ".join(argv)
    client = s._client_env(env)
    assert client["API_TOKEN"] == "secret"
    for name in ("LD_PRELOAD", "XDG_RUNTIME_DIR", "HOME"):
        assert client.get(name) == os.environ.get(name)


def test_an_exec_cannot_point_the_client_at_a_socket_in_the_workspace(jail_bin, project):
    """XDG_RUNTIME_DIR chooses the directory the client looks for sessions in: one in a
    workspace the command can write would reach a server the command runs. The command gets
    the variable; the client keeps its own and reaches the real session."""
    runtime = project / "run"
    with JailSession.start(cwd=project, rw=[project], jail=jail_bin) as s:
        made = s.exec(["sh", "-c", 'mkdir -m 700 "$1" "$1/jail-sessions"', "sh", str(runtime)])
        assert made.exit_code == 0, made.stderr
        r = s.exec(["sh", "-c", 'printf %s "$XDG_RUNTIME_DIR"; ' + jail_bin + " status >/dev/null"],
                   env={"XDG_RUNTIME_DIR": str(runtime)})
        assert (r.exit_code, r.stdout) == (0, str(runtime).encode()), r.stderr


# -- the jail binary ------------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["rw", "cow"])
def test_a_jail_binary_the_session_could_rewrite_is_refused(jail_bin, project, scratch, flag):
    """A command could replace it, and a later `jail status` (attach, resume) would be its."""
    bindir = scratch / "bin"
    bindir.mkdir()
    copy = bindir / "jail"
    shutil.copy(jail_bin, copy)
    copy.chmod(0o755)
    with pytest.raises(SessionStartError, match="writable inside the session"):
        JailSession.start(cwd=project, ro=[project], jail=str(copy), **{flag: [scratch]})
    with pytest.raises(SessionStartError, match="writable inside the session"):
        JailSession.start_with_args([f"--{flag}={bindir}"], cwd=project, jail=str(copy))


# -- output held open -----------------------------------------------------------------------


def test_output_held_by_what_a_command_left_running_does_not_hold_the_call(jail_bin, project):
    """A command that leaves a process behind with its stdout (`server &`) returns once it
    has exited, with what it wrote; the process goes on until the session stops."""
    import asyncio
    import time

    from conftest import wait_gone

    s = JailSession.start(cwd=project, ro=[project], jail=jail_bin)
    try:
        began = time.monotonic()
        r = s.exec(["sh", "-c", "sleep 987.61 & echo started"], timeout=60)
        assert (r.exit_code, r.stdout, r.output_left_open) == (0, b"started\n", True)
        r = asyncio.run(s.aexec(["sh", "-c", "setsid sleep 987.62 & echo started >&2"]))
        assert (r.exit_code, r.stderr, r.output_left_open) == (0, b"started\n", True)
        assert time.monotonic() - began < 15
        assert wait_gone("sleep 987.6", within=0.2) != []  # still running
        big = s.exec(["head", "-c", "3000000", "/dev/zero"])
        assert len(big.stdout) == 3000000 and not big.output_left_open
        echoed = asyncio.run(s.aexec(["cat"], input=b"x" * 2_000_000))
        assert echoed.stdout == b"x" * 2_000_000
        assert s.exec(["cat"], input=b"y" * 2_000_000).stdout == b"y" * 2_000_000
    finally:
        s.stop()
    assert wait_gone("sleep 987.6") == []


def test_every_variable_jail_reads_is_kept_from_the_client():
    """Each environment variable jail's own sources read is one an exec passes on the command
    line, never in the client's environment (a new one in jail must be added here too)."""
    import re

    from jail_sandbox.session import _client_var

    src = Path(__file__).resolve().parents[3] / "src"
    names = set()
    for path in src.rglob("*.rs"):
        text = path.read_text()
        names |= set(re.findall(r'env::var(?:_os)?\(\s*"([A-Za-z_][A-Za-z0-9_]*)"', text))
        names |= set(re.findall(r'const VAR: &str = "([A-Za-z_][A-Za-z0-9_]*)"', text))
    assert {"XDG_RUNTIME_DIR", "HOME", "RUST_LOG"} <= names, names
    assert [n for n in sorted(names) if not _client_var(n)] == []


def test_a_jail_in_a_relative_path_directory_is_never_found(tmp_path, monkeypatch, jail_bin):
    """A relative PATH entry names the current directory's: a `jail` a command wrote into the
    project must not be what the next session runs on this side."""
    from jail_sandbox import JailNotFound, find_jail

    fake = tmp_path / "jail"
    fake.write_text("#!/bin/sh\ntouch \"$(dirname \"$0\")/ran\"\n")
    fake.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("JAIL_BIN", raising=False)
    real_dir = os.path.dirname(jail_bin)
    for path in (f".:{real_dir}", f":{real_dir}", f"{real_dir}:."):
        monkeypatch.setenv("PATH", path)
        assert find_jail() == jail_bin
        assert find_jail("jail") == jail_bin
    monkeypatch.setenv("PATH", ".")
    with pytest.raises(JailNotFound):
        find_jail()
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize("how", ["profile", "cache", "tmp"])
def test_a_jail_binary_writable_by_a_profile_cache_or_host_tmp_is_refused(
        jail_bin, project, scratch, how):
    """Not only --rw/--cow make a path writable: a profile's paths (`workspace`: the current
    directory), a --cache layer and `--tmp host` do too. The policy jail resolves for the
    session's flags decides, and the binary must be read-only in it."""
    import tempfile

    if how == "tmp":
        base = Path(tempfile.mkdtemp(prefix="jail-sandbox-test-", dir="/tmp"))
    else:
        base = scratch
    bindir = base / "bin"
    bindir.mkdir()
    copy = bindir / "jail"
    shutil.copy(jail_bin, copy)
    copy.chmod(0o755)
    flags = {"profile": dict(profile="workspace"),
             "cache": dict(extra_args=["--cache", str(bindir)]),
             "tmp": dict(extra_args=["--tmp", "host"])}[how]
    cwd = base if how == "profile" else project
    try:
        # the premise: under these flags a command can rewrite the binary
        argv = JailSession.build_args(ro=[project], require=None, **flags)
        probe = subprocess.run([jail_bin, *argv, "--", "sh", "-c", f": >> {copy}"], cwd=cwd,
                               capture_output=True, text=True, timeout=60, check=False)
        assert probe.returncode == 0, probe.stderr
        with pytest.raises(SessionStartError, match="writable inside the session") as e:
            JailSession.start(cwd=cwd, ro=[project], jail=str(copy), **flags)
        assert str(bindir) in str(e.value) or "/tmp" in str(e.value)
    finally:
        if how == "tmp":
            shutil.rmtree(base, ignore_errors=True)


def test_what_an_earlier_command_left_cannot_write_into_a_later_jail_status(jail_bin, project):
    """Each exec of a session is a Landlock domain of its own: a process one command leaves
    behind writes into every other process's stdout it can open through /proc, and reaches
    none of a later exec's, so what `jail status` prints is jail's own."""
    forger = (
        "setsid sh -c 'end=$(($(date +%s)+8)); while [ $(date +%s) -lt $end ]; do "
        "for f in /proc/[0-9]*/fd/1; do (echo FORGED >> $f) 2>/dev/null; done; done' "
        "</dev/null >/dev/null 2>&1 &"
    )
    with JailSession.start(cwd=project, ro=[project], jail=jail_bin) as s:
        assert s.exec(["sh", "-c", forger]).exit_code == 0
        for _ in range(5):
            r = s.exec([jail_bin, "status", "--json"])
            assert r.exit_code == 0, r
            assert b"FORGED" not in r.stdout + r.stderr, r
            assert json.loads(r.stdout)["verdict"] == "confined"


def test_a_session_whose_execs_share_one_domain_is_refused_and_stopped(jail_bin, project):
    """With unix sockets allowed the session's execs share one Landlock domain (jail says
    `execs_isolated: false`): a process one command leaves could change what a later `jail
    status` answers, so the session is not taken for confined."""
    with pytest.raises(NotConfined, match="share one Landlock domain"):
        JailSession.start(cwd=project, ro=[project], jail=jail_bin,
                          extra_args=["--allow-unix-sockets"])
    listed = json.loads(jail_cli(jail_bin, "session", "list", "--json").stdout)["sessions"]
    assert [s["name"] for s in listed if s["cwd"] == str(project)] == []  # stopped again
