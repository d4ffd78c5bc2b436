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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hunkwise.shared import git
from hunkwise.shared.errors import CheckFailed, UsageError
from hunkwise.shared.git import checkout as git_checkout
from hunkwise.shared.proc import run_command
from hunkwise.shared.state.config import DEFAULT_INPUTS, CheckoutSettings
from hunkwise.shared.state.models import CheckResult

if TYPE_CHECKING:
    from hunkwise.shared.hunks.diff import FileChange
    from hunkwise.shared.hunks.taskview import TreeView
    from hunkwise.shared.state.context import Ctx
    from hunkwise.shared.state.documents import CommandResult

TAIL_CHARS = 4000
# The lines of a verify (or bisect) command's output kept in its result.
VERIFY_TAIL_LINES = 40


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


def run_commands(where: Path, commands: list[str], timeout: float, *, label: str = "verify",
                 stop_early: bool = False) -> list[CommandResult]:
    """Run commands in a checkout, each streamed to stderr; their results."""
    results: list[CommandResult] = []
    for i, cmd in enumerate(commands, 1):
        sys.stderr.write(f"{label} [{i}/{len(commands)}] {cmd}\n")
        ran = run_command(cmd, where, timeout, label=f"{i}", tail_lines=VERIFY_TAIL_LINES)
        code, secs, tail = ran.exit_code, ran.duration_s, ran.tail
        results.append({"command": cmd, "exit_code": code, "duration_s": secs,
                        "passed": code == 0, "output_tail": "\n".join(tail)})
        sys.stderr.write(f"{label} [{i}/{len(commands)}] "
                         f"{'pass' if code == 0 else 'FAIL'} in {secs:.1f}s\n")
        if stop_early and code != 0:
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
             reuse: bool | None = None,
             reused: list[bool] | None = None) -> contextlib.AbstractContextManager[Path]:
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
        reused=reused if reused is not None else [],
        setup=(lambda where: _setup(where, setup, settings.timeout_seconds)) if setup else None)
    return _scratch(repo, commit, root, recipe)


def _setup(where: Path, commands: Sequence[str], timeout_s: float) -> None:
    run_setup(where, commands, timeout_s)


@contextlib.contextmanager
def _scratch(repo: Path, commit: str, root: Path,
             recipe: git_checkout.Recipe) -> Iterator[Path]:
    with git_checkout.scratch(repo, commit, root, recipe) as where:
        yield where


# ---- a task's checks on HEAD + exactly its changes ----------------------------------------

@dataclass
class TaskCheck:
    """A task's checks run on HEAD + exactly its own changes (`where` "isolated"), or in
    the shared tree ("tree")."""

    where: str
    commit: str | None
    results: list[CheckResult]
    # What the shared tree holds that the isolated checkout did not: (path, whose).
    left_out: list[tuple[str, str]]
    reused: bool | None = None

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)


def left_out(tv: TreeView, task_id: str) -> list[tuple[str, str]]:
    """The shared tree's changes that are not the task's: another task's, or no one's."""
    out: dict[str, set[str]] = {}
    for tid, changes in tv.attribution.owned.items():
        if tid != task_id:
            for ch in changes:
                out.setdefault(ch.path, set()).add(f"task {tid}")
    for ch, _h in tv.attribution.unowned:
        out.setdefault(ch.path, set()).add("unowned")
    for ch, _h, tids in tv.attribution.conflicts:
        out.setdefault(ch.path, set()).add("conflict: " + ", ".join(tids))
    return [(p, "; ".join(sorted(w))) for p, w in sorted(out.items())]


def task_tree_commit(ctx: Ctx, tv: TreeView, task_id: str, mine: list[FileChange]) -> str:
    """A commit holding HEAD + exactly the task's changes: what `coord accept` would commit
    (shared/hunks/commitplan.py), as a dangling commit the checkout can check out."""
    head = tv.snap.head
    if head is None:
        raise UsageError("the repository has no commit yet: isolated checks need one "
                         "(or set [checks] where = \"tree\" in coord.toml)")
    if not mine:
        return head
    from hunkwise.shared.hunks.commitplan import plan_commit

    plan = plan_commit(ctx, tv, task_id, mine)
    return git.run(ctx.repo, "commit-tree", plan.tree, "-p", head,
                   input=f"hunkwise: HEAD + {task_id}'s changes, for its checks\n".encode()
                   ).decode().strip()


def task_checks(ctx: Ctx, tv: TreeView | None, task_id: str, commands: Sequence[str],
                mine: list[FileChange], where: str) -> TaskCheck:
    """Run a task's checks where the settings say: streamed to stderr, tails kept."""
    timeout = ctx.config.checks.timeout_seconds
    if where == "tree":
        return TaskCheck("tree", None, run_checks(ctx.repo, commands, timeout, label="check"), [])
    assert tv is not None
    commit = task_tree_commit(ctx, tv, task_id, mine)
    settings = ctx.config.checkout
    seen: list[bool] = []
    with checkout(ctx.repo, ctx.lay.root, commit, settings, reused=seen) as at:
        results = run_checks(at, commands, timeout, label="check")
    return TaskCheck("isolated", commit, results, left_out(tv, task_id),
                     reused=seen[0] if seen else None)


def isolated_text(check: TaskCheck, task_id: str) -> str:
    """Why an isolated check can differ from a run in the shared tree."""
    if check.where != "isolated":
        return ""
    lines = [f"ran on HEAD + exactly {task_id}'s changes, in a scratch checkout "
             f"({(check.commit or '')[:12]})"]
    if check.left_out:
        lines.append("not in that checkout (the shared tree has them, uncommitted):")
        lines += [f"  {p} ({who})" for p, who in check.left_out[:20]]
        if len(check.left_out) > 20:
            lines.append(f"  (+{len(check.left_out) - 20} more)")
    return "\n".join(lines)
