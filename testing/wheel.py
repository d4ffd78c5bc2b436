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
            subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "-q",
                            "wheel", "--no-deps", "-w", str(dist), str(ROOT)], check=True,
                           capture_output=True)
            found = sorted(dist.glob("hunkwise-*.whl"))
    return found[0]
