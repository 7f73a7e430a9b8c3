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
