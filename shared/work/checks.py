"""Running a task's targeted checks, and the scratch checkouts they (and verify) run in.

Through the one door for user commands (`proc.run_command`): a check that times out or is
interrupted takes every process it started with it. Output streams to stderr while a
command runs (prefixed with its label and the time); a bounded tail is kept.

`checkout(...)` is the one way hunkwise prepares a tree outside the shared one (verify, the
accept recheck, isolated worker checks, bisect): shared/git/checkout.py makes or resets it,
this module runs the `[checkout] setup` commands in it (docs/checkouts.md).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from hunkwise.shared.errors import CheckFailed
from hunkwise.shared.git import checkout as git_checkout
from hunkwise.shared.proc import run_command
from hunkwise.shared.state.config import DEFAULT_INPUTS, CheckoutSettings
from hunkwise.shared.state.models import CheckResult

TAIL_CHARS = 4000


class SetupFailed(CheckFailed):
    """A `[checkout] setup` command failed: nothing after it ran (exit 1)."""

    def __init__(self, message: str, result: CheckResult, details: str = "") -> None:
        super().__init__(message, details)
        self.result = result


def run_checks(cwd: Path, commands: Sequence[str], timeout_s: float, *,
               label: str | None = None,
               stop_early: bool = False) -> list[CheckResult]:
    """Each command's result; with `label`, output streams to stderr as it comes."""
    results: list[CheckResult] = []
    for i, cmd in enumerate(commands, 1):
        tag = f"{label} {i}/{len(commands)}" if label else None
        if tag:
            sys.stderr.write(f"[{tag}] $ {cmd}\n")
        ran = run_command(cmd, cwd, timeout_s, tail_lines=60, label=tag)
        results.append(CheckResult(command=cmd, exit_code=ran.exit_code, passed=ran.passed,
                                   duration_s=ran.duration_s,
                                   output_tail=ran.output_tail[-TAIL_CHARS:]))
        if tag:
            sys.stderr.write(f"[{tag}] {'pass' if ran.passed else 'FAIL'} in "
                             f"{ran.duration_s:.1f}s\n")
        if stop_early and not ran.passed:
            break
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


def run_setup(where: Path, commands: Sequence[str], timeout_s: float) -> list[CheckResult]:
    """Run the setup commands in order, streamed; the first that fails stops the run."""
    results = run_checks(where, commands, timeout_s, label="setup", stop_early=True)
    bad = [r for r in results if not r.passed]
    if bad:
        why = "timed out" if bad[0].exit_code == 124 else f"exit {bad[0].exit_code}"
        raise SetupFailed(f"setup command {bad[0].command!r} failed ({why}) in the scratch "
                          "checkout; nothing else ran", bad[0], details=failure_text(bad))
    return results


def checkout(repo: Path, root: Path, commit: str, settings: CheckoutSettings, *,
             made: Callable[[Path], None] | None = None,
             reuse: bool | None = None) -> contextlib.AbstractContextManager[Path]:
    """A scratch checkout of `commit` with `settings` applied: carried and linked paths in
    place, setup done; cached between runs when the settings say so (`reused`)."""
    cached = settings.reused if reuse is None else reuse
    key = None
    if cached:
        key = git_checkout.setup_key(repo, commit, setup=settings.setup, carry=settings.carry,
                                     link=settings.link, inputs=settings.inputs or DEFAULT_INPUTS)
    setup = settings.setup
    recipe = git_checkout.Recipe(
        carry=settings.carry, link=settings.link, key=key, made=made,
        setup=(lambda where: _setup(where, setup, settings.timeout_seconds)) if setup else None)
    return _scratch(repo, commit, root, recipe)


def _setup(where: Path, commands: Sequence[str], timeout_s: float) -> None:
    run_setup(where, commands, timeout_s)


@contextlib.contextmanager
def _scratch(repo: Path, commit: str, root: Path,
             recipe: git_checkout.Recipe) -> Iterator[Path]:
    with git_checkout.scratch(repo, commit, root, recipe) as where:
        yield where
