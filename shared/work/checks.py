"""Running a task's targeted checks: exit code, duration, and the tail of the output.

Through the one door for user commands (`proc.run_command`): a check that times out or is
interrupted takes every process it started with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hunkwise.shared.proc import run_command
from hunkwise.shared.state.models import CheckResult

TAIL_CHARS = 4000


def run_checks(cwd: Path, commands: Sequence[str], timeout_s: float) -> list[CheckResult]:
    results: list[CheckResult] = []
    for cmd in commands:
        ran = run_command(cmd, cwd, timeout_s, tail_lines=60)
        results.append(CheckResult(command=cmd, exit_code=ran.exit_code, passed=ran.passed,
                                   duration_s=ran.duration_s,
                                   output_tail=ran.output_tail[-TAIL_CHARS:]))
    return results


def failure_text(results: Sequence[CheckResult], lines: int = 12) -> str:
    """Each failing check with the last lines of its output, for a one-glance message."""
    out = []
    for r in results:
        if r.passed:
            continue
        why = "timed out" if r.exit_code == 124 else f"exit {r.exit_code}"
        tail = "\n".join("    " + line for line in r.output_tail.rstrip("\n").split("\n")[-lines:])
        out.append(f"{r.command!r} ({why})" + (f":\n{tail}" if r.output_tail.strip() else ""))
    return "\n".join(out)
