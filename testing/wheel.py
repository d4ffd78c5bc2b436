"""The project's wheel, built once per test run and shared by every test (and xdist
worker) that inspects or installs it."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

from testing.env import ROOT


def built_wheel(factory: pytest.TempPathFactory) -> Path:
    """`pip wheel` of the project, in the run's temporary root: the first test to ask
    builds it (under a lock), the others find it."""
    base = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # each worker's folder is inside the run's
    dist = base / "wheel"
    dist.mkdir(exist_ok=True)
    with open(dist / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = sorted(dist.glob("hunkwise-*.whl"))
        if not found:
            # The venv's own backend where it is one pyproject.toml accepts (the test
            # extras install it): the same wheel, without pip building an isolated
            # environment for it first (seconds).
            isolation = ["--no-build-isolation"] if _own_backend() else []
            subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "-q",
                            "wheel", "--no-deps", *isolation, "-w", str(dist), str(ROOT)],
                           check=True, capture_output=True)
            found = sorted(dist.glob("hunkwise-*.whl"))
    return found[0]


def _own_backend() -> bool:
    """Is setuptools 70.1 or later (the first that builds wheels alone) importable here?"""
    import importlib.metadata

    try:
        major, minor = (int(x) for x in importlib.metadata.version("setuptools").split(".")[:2])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return False
    return (major, minor) >= (70, 1)
