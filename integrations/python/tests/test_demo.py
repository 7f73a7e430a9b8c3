"""The README's second command, `python -m jail_sandbox.demo`, does what the README says: `jail
status` exits 0 inside, a write into the read-only project fails with the kernel's EROFS, and the
--cow run's edits wait as a jail run while the project is unchanged."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path


def _demo(*args: str) -> str:
    run = subprocess.run(
        [sys.executable, "-m", "jail_sandbox.demo", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ),
    )
    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout
    assert "Read-only file system" in out, out
    match = re.search(r"the edits wait as run (\S+): jail diff", out)
    assert match, out
    return match.group(1)


def _discard(jail_bin: str, run_id: str) -> None:
    subprocess.run([jail_bin, "discard", run_id], capture_output=True, check=True)


def test_the_readme_demo_as_written(jail_bin: str) -> None:
    _discard(jail_bin, _demo())


def test_the_demo_on_a_project_leaves_it_unchanged(jail_bin: str, project: Path) -> None:
    before = (project / "README.md").read_text()
    run_id = _demo(str(project))
    assert (project / "README.md").read_text() == before
    assert not (project / "NOTES.md").exists()
    diff = subprocess.run([jail_bin, "diff", run_id], capture_output=True, text=True)
    assert "edited by the agent" in diff.stdout, diff.stdout + diff.stderr
    _discard(jail_bin, run_id)


def test_the_demo_never_prints_a_projects_escape_sequences(jail_bin: str, project: Path) -> None:
    """The demo shows what the commands printed; on a project of the user's that is the
    project's content (a README without a final newline: `tail -1` shows its last line with
    the agent's), so control characters are escaped, never sent to the terminal."""
    (project / "README.md").write_text("title \x1b]0;owned\x07\x1b[2J\u009b")
    run = subprocess.run([sys.executable, "-m", "jail_sandbox.demo", str(project)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "title \\x1b]0;owned\\x07\\x1b[2J\\x9bedited by the agent" in run.stdout, run.stdout
    assert "\x1b" not in run.stdout and "\x07" not in run.stdout and "\u009b" not in run.stdout
    match = re.search(r"the edits wait as run (\S+): jail diff", run.stdout)
    assert match, run.stdout
    _discard(jail_bin, match.group(1))


def test_the_suite_leaves_no_runs_of_its_own(jail_bin: str, scratch: Path) -> None:
    """The scratch fixture's teardown discards the runs whose roots are in it (checked here on
    a run made for the purpose)."""
    from conftest import discard_runs_under, pending_runs_under

    root = scratch / "p"
    root.mkdir()
    made = subprocess.run([jail_bin, "--cow", str(root), "--", "sh", "-c", "echo x > f"],
                          cwd=root, capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    assert len(pending_runs_under(scratch)) == 1
    discard_runs_under(scratch)
    assert pending_runs_under(scratch) == []
