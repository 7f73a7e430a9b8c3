"""Fixtures: the jail binary (JAIL_BIN or PATH; the suite fails without one, it never skips),
and projects under /var/tmp (not /tmp, which a jail shows private; not a home, which it hides)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from jail_sandbox import find_jail

FIXTURES = os.environ.get("JAIL_SANDBOX_TEST_DIR", "/var/tmp")


@pytest.fixture(scope="session")
def jail_bin() -> str:
    return find_jail()


@pytest.fixture
def scratch():
    path = Path(tempfile.mkdtemp(prefix="jail-sandbox-test-", dir=FIXTURES))
    os.chmod(path, 0o755)
    yield path
    discard_runs_under(path)
    shutil.rmtree(path, ignore_errors=True)


def pending_runs_under(root: Path) -> list[str]:
    """The ids of the --cow runs waiting for review whose roots are all under `root`."""
    import json

    out = subprocess.run([find_jail(), "runs", "--json"], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    prefix = str(root).rstrip("/") + "/"
    return [r["id"] for r in json.loads(out)
            if r.get("roots") and all((str(p) + "/").startswith(prefix) for p in r["roots"])]


def discard_runs_under(root: Path) -> None:
    """A test's --cow runs are its own (their roots are in its scratch directory): thrown
    away at its end, not left in jail's state directory run after run."""
    for run_id in pending_runs_under(root):
        subprocess.run([find_jail(), "discard", run_id], capture_output=True, timeout=60,
                       check=False)


@pytest.fixture
def project(scratch: Path) -> Path:
    """A small project: README.md and src/app.py."""
    root = scratch / "project"
    (root / "src").mkdir(parents=True)
    (root / "README.md").write_text("hello\n")
    (root / "src" / "app.py").write_text("print('app')\n")
    return root


def host_processes(marker: str) -> list[str]:
    """Every process on the host whose command line holds `marker` (all pid namespaces)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if marker in cmdline and "pytest" not in cmdline:
            found.append(f"{pid}: {cmdline}")
    return found


def wait_gone(marker: str, within: float = 5.0) -> list[str]:
    """The processes still holding `marker` after up to `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        left = host_processes(marker)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def jail_cli(jail: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [jail, *args], capture_output=True, text=True, cwd=cwd, timeout=60, check=False
    )


def session_names(jail: str) -> list[str]:
    import json

    out = jail_cli(jail, "session", "list", "--json").stdout
    return [s["name"] for s in json.loads(out)["sessions"]]
