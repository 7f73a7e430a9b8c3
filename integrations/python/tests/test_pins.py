"""The suite runs on the dependency set constraints.txt pins (test.sh installs with it): every
distribution in this environment is listed there at the version installed, so a new or moved
dependency shows here rather than as a different machine's different result."""

from __future__ import annotations

import re
from importlib.metadata import distributions
from pathlib import Path

CONSTRAINTS = Path(__file__).resolve().parents[1] / "constraints.txt"
# the package itself, and what the venv brings (Debian's pip and setuptools)
_NOT_PINNED = {"jail-sandbox", "pip", "setuptools"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins() -> dict[str, str]:
    pins = {}
    for line in CONSTRAINTS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        assert sep and version and ";" not in line, f"not an exact pin: {line!r}"
        pins[_norm(name)] = version
    return pins


def test_every_installed_distribution_is_pinned_at_its_version():
    pins = _pins()
    installed = {_norm(d.metadata["Name"]): d.version for d in distributions()}
    wrong = {
        name: (version, pins.get(name))
        for name, version in installed.items()
        if name not in _NOT_PINNED and pins.get(name) != version
    }
    assert wrong == {}, f"installed vs constraints.txt: {wrong}"
    assert installed["openai-agents"] == pins["openai-agents"] == "0.24.0"
    assert "pytest" in pins and "setuptools" in pins  # the build's, through PIP_CONSTRAINT


def test_test_sh_installs_with_the_constraints():
    text = (CONSTRAINTS.parent / "test.sh").read_text()
    assert re.search(r'PIP_CONSTRAINT="\$here/constraints.txt"\s*\\\n\s*"\$venv/bin/pip" install',
                     text), text


def test_the_build_declares_no_metadata_setuptools_will_refuse():
    """`project.license` as a table is deprecated since setuptools 77, whose warning says it
    must go by 2027-02-18: the README's `pip install` builds with the newest setuptools."""
    import tomllib

    meta = tomllib.loads((CONSTRAINTS.parent / "pyproject.toml").read_text())
    assert meta["project"]["license"] == "MIT OR Apache-2.0"
    assert meta["build-system"]["requires"] == ["setuptools>=77"]
    assert "setuptools==" in CONSTRAINTS.read_text()
