"""`coord verify --bisect`: which task commit of a failed batch broke it.

Each accepted task is one commit with a `Coord-Task:` trailer, so a failed batch is a short
line of commits from the batch's base (the parent of its first task commit) to the frozen
commit, which is known to fail. As merge queues split a failed batch (Mergify's batch
splitting, a refinery's bisection), only what failed is run again: the failing commands,
the first of them first, each probe stopping at its first failure, in a binary search for
the first task commit that fails. The base is taken to pass (the previous batch was
verified). Then the culprit's own change is applied alone to the base and run once more,
to say whether it fails alone or only together with the commits before it.
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import TYPE_CHECKING

from hunkwise.shared import git
from hunkwise.shared.errors import CoordError
from hunkwise.shared.state import config
from hunkwise.shared.state.context import Ctx
from hunkwise.shared.state.models import Freeze, TaskState
from hunkwise.shared.work import checks

if TYPE_CHECKING:
    from hunkwise.shared.state.documents import BisectProbe, BisectResult
    from hunkwise.shared.state.models import State

# How far back the first-parent history is read for the batch's task commits.
MAX_HISTORY = 10_000


def task_commits(ctx: Ctx, state: State, fz: Freeze) -> list[tuple[str, str, str | None]]:
    """The batch's task commits on the frozen commit's first-parent line, oldest first:
    (commit, task id, first parent)."""
    assert fz.commit is not None
    batch = {t.id: t.commit for t in state.tasks.values()
             if t.state == TaskState.ACCEPTED and t.batch == fz.batch}
    if not batch:
        return []
    out = git.run(ctx.repo, "log", "--first-parent", f"--max-count={MAX_HISTORY}",
                  "--format=%H %P%x1f%(trailers:key=Coord-Task,valueonly,separator=%x2C)%x1e",
                  fz.commit)
    found: list[tuple[str, str, str | None]] = []
    left = set(batch)
    for rec in out.decode("utf-8", "replace").split("\x1e"):
        rec = rec.strip("\n")
        if not rec:
            continue
        ids, _, trailers = rec.partition("\x1f")
        shas = ids.split()
        names = [n.strip() for n in trailers.split(",") if n.strip()]
        tid = next((n for n in names if n in left and batch[n] in (None, shas[0])), None)
        if tid is not None:
            found.append((shas[0], tid, shas[1] if len(shas) > 1 else None))
            left.discard(tid)
            if not left:
                break
    found.reverse()
    return found


def _alone(ctx: Ctx, commit: str, parent: str | None, base: str | None) -> str | None:
    """A commit holding `base` + exactly `commit`'s own change; None when it does not apply."""
    if base is None or parent is None:
        return None
    patch = git.run(ctx.repo, "diff-tree", "-p", "--binary", "--full-index", "--no-renames",
                    parent, commit)
    with tempfile.TemporaryDirectory(prefix="hunkwise-bisect-", dir=str(ctx.lay.root)) as tmp:
        env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
        git.run(ctx.repo, "read-tree", base, env=env)
        if patch.strip():
            rc, _ = git.run_rc(ctx.repo, "apply", "--cached", "--binary", "-", env=env, input=patch)
            if rc != 0:
                return None
        tree = git.run(ctx.repo, "write-tree", env=env).decode().strip()
    return git.run(ctx.repo, "commit-tree", tree, "-p", base,
                   input=b"hunkwise bisect: one task's change alone on its batch's base\n"
                   ).decode().strip()


def bisect_batch(ctx: Ctx, state: State, fz: Freeze, failing: list[str],
                 settings: config.Config) -> BisectResult:
    assert fz.commit is not None
    seq = task_commits(ctx, state, fz)
    ran: list[BisectProbe] = []
    timeout = settings.verify.timeout_seconds
    known: dict[str, bool] = {fz.commit: True}  # commit -> fails
    tasks = [tid for _c, tid, _p in seq]
    base = seq[0][2] if seq else None

    def result(culprit: str | None, commit: str | None, alone: bool | None,
               note: str) -> BisectResult:
        return {"culprit": culprit, "commit": commit, "alone": alone, "base": base,
                "commands": failing, "tasks": tasks, "ran": ran, "note": note}

    def fails(commit: str, task: str | None, alone: bool = False) -> bool:
        if commit in known:
            return known[commit]
        sys.stderr.write(f"bisect: {'alone on the base: ' if alone else ''}"
                         f"{task or '?'} at {commit[:12]}\n")
        # A cached checkout: each probe resets it, the setup runs again only when its
        # inputs changed between the commits.
        with checks.checkout(ctx.repo, ctx.lay.root, commit, settings.checkout,
                             reuse=True) as where:
            got = checks.run_commands(where, failing, timeout, label="bisect", stop_early=True)
        for c in got:
            ran.append({"commit": commit, "task": task, "alone": alone, "command": c["command"],
                        "exit_code": c["exit_code"], "passed": c["passed"],
                        "duration_s": c["duration_s"]})
        known[commit] = any(not c["passed"] for c in got)
        return known[commit]

    if not seq:
        return result(None, None, None, "the batch has no task commits to bisect")
    try:
        lo, hi = 0, len(seq)  # every index below lo passes (the base is taken to pass)
        if seq[-1][0] == fz.commit:
            hi = len(seq) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if fails(seq[mid][0], seq[mid][1]):
                hi = mid
            else:
                lo = mid + 1
        if hi == len(seq):
            return result(None, None, None, "every task commit passes: the failure comes from "
                          f"a commit after the last one ({seq[-1][0][:12]}..{fz.commit[:12]})")
        commit, tid, parent = seq[hi]
        if parent == base:
            return result(tid, commit, True, f"{tid} is the batch's first commit: it fails "
                          "alone on the base")
        alone = _alone(ctx, commit, parent, base)
        if alone is None:
            return result(tid, commit, None, f"{tid}'s change does not apply to the batch's "
                          "base alone: it builds on the commits before it")
        by_itself = fails(alone, tid, alone=True)
        return result(tid, commit, by_itself,
                      f"{tid} fails alone on the batch's base" if by_itself else
                      f"{tid} passes alone on the batch's base: it fails only together with "
                      "the commits before it")
    except checks.SetupFailed as e:
        return result(None, None, None, f"stopped: {e.message}")
    except CoordError as e:
        return result(None, None, None, f"stopped: {e.message}")
