"""The contract's happy path (../shared/acceptance/smoke.py), run inside the suite."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SMOKE = Path(__file__).resolve().parents[2] / "shared" / "acceptance" / "smoke.py"


@pytest.mark.slow
@pytest.mark.skipif(not SMOKE.exists(), reason="the team's shared/ folder is not beside the project")
def test_smoke_contract_holds() -> None:
    env = dict(os.environ)
    p = subprocess.run([sys.executable, str(SMOKE)], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
