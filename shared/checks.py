"""Running a task's targeted checks: exit code, duration, and the tail of the output."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from .models import CheckResult

TAIL_CHARS = 4000


def run_checks(cwd: Path, commands: Sequence[str], timeout_s: float) -> list[CheckResult]:
    results: list[CheckResult] = []
    for cmd in commands:
        start = time.monotonic()
        try:
            proc = subprocess.run(["/bin/sh", "-c", cmd], cwd=str(cwd), stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  timeout=timeout_s, env=dict(os.environ))
            code, out = proc.returncode, proc.stdout
        except subprocess.TimeoutExpired as e:
            code = 124
            out = (e.stdout or b"") + f"\n[timed out after {timeout_s:g}s]\n".encode()
        text = out[-TAIL_CHARS * 4:].decode("utf-8", "replace")[-TAIL_CHARS:]
        results.append(CheckResult(command=cmd, exit_code=code, passed=code == 0,
                                   duration_s=round(time.monotonic() - start, 3),
                                   output_tail=text))
    return results
