"""The Python API over jail sessions, against the real jail binary."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import jail_cli, session_names, wait_gone

from jail_sandbox import (
    JailNotFound,
    JailSession,
    NotConfined,
    SessionGone,
    SessionStartError,
)


def test_read_only_project_write_fails_with_the_kernels_error(jail_bin, project):
    with JailSession.start(cwd=project, ro=[project], jail=jail_bin) as s:
        assert "inside a jail" in (s.verified_status or "")
        r = s.exec(["sh", "-c", "echo changed > README.md"])
        assert r.exit_code == 2
        assert "Read-only file system" in r.stderr_text
        r = s.exec(["python3", "-c", "open('src/app.py', 'w')"])
        assert r.exit_code == 1
        assert "OSError: [Errno 30] Read-only file system" in r.stderr_text
        assert s.exec(["cat", "README.md"]).stdout == b"hello\n"
    assert (project / "README.md").read_text() == "hello\n"
    assert s.outcome is not None and s.outcome.status == "stopped"
    assert s.outcome.level == "full" and s.outcome.gaps == []


def test_exit_codes_output_stdin_env_and_cwd(jail_bin, project, scratch):
    tools = scratch / "tools"
    tools.mkdir()
    noexec = tools / "noexec.sh"
    noexec.write_text("#!/bin/sh\necho never\n")
    os.chmod(noexec, stat.S_IRUSR | stat.S_IWUSR)
    with JailSession.start(cwd=project, ro=[project, tools], jail=jail_bin) as s:
        r = s.exec(["sh", "-c", "echo out; echo err >&2; exit 7"])
        assert (r.exit_code, r.stdout, r.stderr) == (7, b"out\n", b"err\n")
        assert s.exec(["no-such-command-here"]).exit_code == 127
        assert s.exec([str(noexec)]).exit_code == 126
        assert s.exec(["sh", "-c", "kill -TERM $$"]).exit_code == 128 + 15
        assert s.exec(["cat"], input=b"from stdin").stdout == b"from stdin"
        r = s.exec(["sh", "-c", 'printf %s "$GREETING"'], env={"GREETING": "hi there"})
        assert r.stdout == b"hi there"
        assert s.exec(["pwd"], cwd="src").stdout == f"{project}/src\n".encode()
        # Each command is confined: jail status inside exits 0.
        assert s.exec([jail_bin, "status"]).exit_code == 0
        # The variable's value is not on the client's command line.
        assert "hi there" not in " ".join(s.exec_argv(["true"], env={"GREETING": "hi there"}))


def test_exec_timeout_stops_the_whole_tree(jail_bin, project):
    with JailSession.start(cwd=project, ro=[project], jail=jail_bin) as s:
        r = s.exec(["sh", "-c", "sleep 987.311 & sleep 987.312 & wait; echo never"], timeout=1)
        assert r.exit_code == 124 and r.timed_out
        assert b"never" not in r.stdout
        assert wait_gone("sleep 987.31") == []
        assert s.exec(["echo", "still serving"]).stdout == b"still serving\n"


def test_session_stop_ends_what_commands_left_running(jail_bin, project):
    s = JailSession.start(cwd=project, ro=[project], jail=jail_bin)
    r = s.exec(["sh", "-c", "setsid sleep 987.33 >/dev/null 2>&1 & echo started"])
    assert r.stdout == b"started\n"
    assert wait_gone("sleep 987.33", within=0.3) != []
    outcome = s.stop()
    assert outcome.status == "stopped"
    assert wait_gone("sleep 987.33") == []
    assert s.name not in session_names(jail_bin)
    with pytest.raises(SessionGone):
        s.exec(["true"])


def test_session_timeout_bounds_the_session(jail_bin, project):
    s = JailSession.start(cwd=project, ro=[project], timeout=2, jail=jail_bin)
    r = s.exec(["sh", "-c", "sleep 987.34; echo never"])
    assert r.exit_code != 0 and b"never" not in r.stdout
    assert wait_gone("sleep 987.34") == []
    outcome = s.stop()  # the supervisor ended the session itself; its outcome says so
    assert outcome.status == "timed_out" and outcome.exit_code == 124, outcome.raw


def test_cow_session_edits_come_back_as_a_jail_run(jail_bin, project):
    with JailSession.start(cwd=project, cow=[project], jail=jail_bin) as s:
        r = s.exec(["sh", "-c", "echo changed > README.md && echo new > NEW.txt && cat README.md"])
        assert (r.exit_code, r.stdout) == (0, b"changed\n")
        assert s.exec(["cat", "NEW.txt"]).exit_code == 0
        assert s.exec(["sh", "-c", "exit 3"], cwd="src").exit_code == 3
    assert (project / "README.md").read_text() == "hello\n"
    assert not (project / "NEW.txt").exists()
    # The run the layer waits as is the outcome's own cow_run (session stop --json).
    run_id = s.outcome.cow_run
    assert run_id is not None and s.outcome.cow_run_ids == [run_id]
    assert s.outcome.raw["cow_run"] == run_id
    # The report's execs: which exec changed what (the status check first, then ours).
    execs = s.outcome.execs
    assert s.outcome.report["execs"]["total"] == len(execs) == 4, s.outcome.report["execs"]
    status, write, read, fail = execs
    assert status["command"] == [jail_bin, "status"] and status["wrote"] == []
    assert write["command"][:2] == ["sh", "-c"] and write["exit_code"] == 0 and write["alone"]
    assert sorted(os.path.basename(p) for p in write["wrote"]) == ["NEW.txt", "README.md"]
    assert read["command"] == ["cat", "NEW.txt"] and read["wrote"] == []
    assert fail["exit_code"] == 3 and fail["cwd"] == "src"  # as given to jail exec --cwd
    diff = jail_cli(jail_bin, "diff", run_id)
    assert diff.returncode == 0, diff.stderr
    assert "+changed" in diff.stdout and "NEW.txt" in diff.stdout
    applied = jail_cli(jail_bin, "apply", run_id, cwd=project)
    assert applied.returncode == 0, applied.stderr
    assert (project / "README.md").read_text() == "changed\n"
    assert (project / "NEW.txt").read_text() == "new\n"


def test_nothing_changed_no_cow_run(jail_bin, project):
    with JailSession.start(cwd=project, cow=[project], jail=jail_bin) as s:
        assert s.exec(["cat", "README.md"]).exit_code == 0
    assert s.outcome.cow_run is None and s.outcome.cow_run_ids == []
    assert [e["command"] for e in s.outcome.execs][-1] == ["cat", "README.md"]
    with JailSession.start(cwd=project, ro=[project], jail=jail_bin) as s:
        pass
    assert s.outcome.cow_run is None and s.outcome.report["schema"] == "jail-run-report/1"


def test_cow_run_is_the_sessions_own_not_another_runs(jail_bin, project):
    """A --cow run of the same project that ends while the session runs is not the
    session's (the outcome names the session's run; no guess from `jail runs`)."""
    with JailSession.start(cwd=project, cow=[project], jail=jail_bin) as s:
        assert s.exec(["sh", "-c", "echo mine > mine.txt"]).exit_code == 0
        other = jail_cli(jail_bin, "--cow", str(project), "--", "sh", "-c",
                         "echo theirs > theirs.txt", cwd=project)
        assert other.returncode == 0, other.stderr
    run_id = s.outcome.cow_run
    diff = jail_cli(jail_bin, "diff", run_id)
    assert diff.returncode == 0, diff.stderr
    assert "mine.txt" in diff.stdout and "theirs.txt" not in diff.stdout


def test_report_comes_back_with_the_outcome(jail_bin, project, scratch):
    report = scratch / "report.json"
    with JailSession.start(cwd=project, rw=[project], report=report, jail=jail_bin) as s:
        assert s.exec(["sh", "-c", "echo x > written.txt"]).exit_code == 0
    assert report.exists()
    assert s.outcome.report is not None
    assert s.outcome.report["schema"] == "jail-run-report/1"
    changed = [c.get("path") for c in s.outcome.report["changes"]["items"]]
    assert any(str(p).endswith("written.txt") for p in changed), changed


# -- fail closed ---------------------------------------------------------------------------


def test_missing_jail_raises(project, tmp_path):
    with pytest.raises(JailNotFound):
        JailSession.start(cwd=project, ro=[project], jail=str(tmp_path / "no-jail"))
    with pytest.raises(JailNotFound):
        JailSession.start(cwd=project, ro=[project], jail="no-such-jail-binary")


def test_refused_start_raises_and_starts_nothing(jail_bin, project):
    with pytest.raises(SessionStartError) as e:
        JailSession.start(name="py-refused", cwd=project, ro=[project / "missing"], jail=jail_bin)
    assert e.value.exit_code == 125 and "missing" in str(e.value)
    assert "py-refused" not in session_names(jail_bin)


def test_unproven_confinement_raises_and_stops_the_session(jail_bin, project):
    # --allow-userns: a command could forge what status reads, so status answers 2 (advisory)
    with pytest.raises(NotConfined) as e:
        JailSession.start(
            name="py-advisory", cwd=project, ro=[project], extra_args=["--allow-userns"],
            jail=jail_bin,
        )
    assert e.value.exit_code == 2
    assert "py-advisory" not in session_names(jail_bin)


def test_required_level_unmet_raises(jail_bin, project, scratch):
    """Where jail cannot build the full sandbox (here: inside another jail, which refuses the
    user namespace the mount view needs), start raises: nothing runs with less."""
    runtime = scratch / "runtime"
    runtime.mkdir(mode=0o700)
    marker = scratch / "runtime" / "ran"
    code = textwrap.dedent(
        f"""
        import sys
        from jail_sandbox import JailSession, SessionStartError
        try:
            s = JailSession.start(cwd={str(project)!r}, ro=[{str(project)!r}])
        except SessionStartError as e:
            print("REFUSED", e.exit_code, e)
            sys.exit(0)
        s.exec(["touch", {str(marker)!r}])
        print("STARTED")
        """
    )
    proc = subprocess.run(
        [jail_bin, "--rw", str(runtime), "--", "env", f"XDG_RUNTIME_DIR={runtime}",
         f"JAIL_BIN={jail_bin}", sys.executable, "-c", code],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("REFUSED 125"), proc.stdout + proc.stderr
    assert "required enforcement level 'full' not met" in proc.stdout
    assert not marker.exists()


def test_attach_reaches_a_session_started_elsewhere(jail_bin, project):
    proc = jail_cli(jail_bin, "session", "start", "--name", "py-attach", "--ro", str(project),
                    "--require", "full", cwd=project)
    assert proc.returncode == 0, proc.stderr
    s = JailSession.attach("py-attach", jail=jail_bin)
    try:
        assert s.exec(["cat", "README.md"]).stdout == b"hello\n"
    finally:
        s.stop()
    with pytest.raises(SessionGone):
        JailSession.attach("py-attach", jail=jail_bin)


@pytest.mark.parametrize("home", [None, "/var/tmp/jail-sandbox-other-home"])
def test_a_session_env_without_this_process_home_is_still_reached(jail_bin, project, home):
    """`env` is what the session's commands start from. Where it lacks (or changes) HOME or
    XDG_RUNTIME_DIR, jail would register the session in another directory than this
    process's exec, list and stop look in: start raised SessionGone and left the session
    running. The commands get `env`'s values; jail finds the session."""
    env = {"PATH": os.environ["PATH"], "GREETING": "hi"}
    if home is not None:
        env["HOME"] = home
    s = JailSession.start(cwd=project, ro=[project], env=env, jail=jail_bin)
    try:
        assert s.name in session_names(jail_bin)
        r = s.exec(["sh", "-c", 'printf "%s|%s" "$GREETING" "${HOME-unset}"'])
        assert r.stdout.decode() == f"hi|{home or 'unset'}", r.stderr
    finally:
        s.stop()
    assert s.outcome.status == "stopped" and s.name not in session_names(jail_bin)
