"""A task's diff: exactly the patch `coord accept ID` would commit now (`coord diff`,
`coord next --diff`, and a reviewer's `worker review`).

The same selection as accept (what the task owns, plus the ambiguous changes its newest
report claims, minus what it inherited), spliced onto HEAD the same way, then shown by
git itself between HEAD's tree and that tree (renames detected, so a moved file shows its
old and new path). Reads only: the state is not saved, the tree and index untouched.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from hunkwise.shared import git
from hunkwise.shared.errors import UsageError
from hunkwise.shared.hunks.taskview import active_tasks, claims_of, select, sync_ranges, view
from hunkwise.shared.state import store
from hunkwise.shared.state.context import Ctx, get_task
from hunkwise.shared.state.models import report_path

if TYPE_CHECKING:
    from hunkwise.shared.state.documents import DiffFile, DiffResult

SHOW = ("--no-ext-diff", "--no-textconv", "--no-color", "-M", "--full-index")


def task_diff(ctx: Ctx, task_id: str, *, stat: bool = False) -> DiffResult:
    from hunkwise.shared.hunks.commitplan import plan_commit

    state = store.load(ctx.lay)
    task = get_task(state, task_id)
    if not task.active:
        raise UsageError(f"{task_id} is {task.state}: it has no pending changes"
                         + (f" (its commit: {task.commit})" if task.commit else ""))
    sync_ranges(ctx.repo, state)  # in memory only: reading never writes the state
    tv = view(ctx.repo, active_tasks(state))
    # Before any report, show what its report would claim; after, what it did claim.
    sel = select(tv, task, claims_of(task) if task.claimed or task.revision else None)
    from hunkwise.shared.hunks.places import places

    doc: DiffResult = {"task": task_id, "base": tv.snap.head, "files": [], "patch": "",
                       "places": places(ctx.repo, [task], tv.changes, tv.snap.tree)[task_id]}
    if not sel.changes:
        return doc
    plan = plan_commit(ctx, tv, task_id, sel.changes)
    return _shown(ctx, doc, tv.snap.head_tree, plan.tree, stat)


def _shown(ctx: Ctx, doc: DiffResult, base: str, tree: str, stat: bool) -> DiffResult:
    """Fill `doc` with git's own view of base -> tree: per-file counts, and the patch or
    the stat."""
    numstat = git.run(ctx.repo, "diff-tree", "-r", "-z", "--numstat", *SHOW, base, tree)
    doc["files"] = _numstat(numstat)
    if stat:
        doc["stat"] = git.run(ctx.repo, "diff-tree", "-r", "--stat=100", *SHOW, base,
                              tree).decode("utf-8", "replace")
    else:
        doc["patch"] = git.run(ctx.repo, "diff-tree", "-r", "-p", "--binary", *SHOW, base,
                               tree).decode("utf-8", "surrogateescape")
    doc["tree"] = tree
    return doc


def _numstat(out: bytes) -> list[DiffFile]:
    """`--numstat -z`: "A\\tR\\tPATH\\0", or "A\\tR\\t\\0OLD\\0NEW\\0" for a rename."""
    files: list[DiffFile] = []
    fields = out.split(b"\0")
    i = 0
    while i < len(fields):
        head = fields[i]
        if not head:
            i += 1
            continue
        added, removed, path = head.split(b"\t", 2)
        n_added = None if added == b"-" else int(added)
        n_removed = None if removed == b"-" else int(removed)
        row: DiffFile
        if path:
            row = {"added": n_added, "removed": n_removed, "path": report_path(os.fsdecode(path))}
            i += 1
        else:
            row = {"added": n_added, "removed": n_removed,
                   "old_path": report_path(os.fsdecode(fields[i + 1])),
                   "path": report_path(os.fsdecode(fields[i + 2]))}
            i += 3
        files.append(row)
    return files


# ---- from a report's snapshot: review on another machine ------------------------------------

def snapshot_diff(ctx: Ctx, task_id: str, *, stat: bool = False) -> DiffResult:
    """The patch of the task's newest report, computed from the report's own snapshot and
    base (pushed with it by `sync`) rather than the working tree, which on another machine
    does not hold the task's edits. Reads only: the tree, index and state are untouched.

    The same selection and splice as accept, on a view of base -> snapshot with every
    active task's grants mapped to the base.
    """
    from hunkwise.shared.hunks import snapshot
    from hunkwise.shared.hunks.commitplan import plan_commit
    from hunkwise.shared.machines import chains, remote

    state = store.load(ctx.lay)
    task = get_task(state, task_id)
    found = remote.newest_report(ctx, task_id)
    if found is None:
        raise UsageError(f"{task_id} has no report here or in any synced machine's records "
                         "(coord sync fetches them)")
    report, base_tree, snap_tree, origin = found
    mir = chains.mirror(ctx)
    owner = mir["tasks"].get(task_id)
    ranges_at = mir["ranges_at"].get(owner) if owner else state.ranges_at
    tasks = [remote.grants_at(ctx.repo, t, ranges_at, base_tree) for t in active_tasks(state)]
    task = next((t for t in tasks if t.id == task_id), task)
    snap = snapshot.Snapshot(tree=git.Sha(snap_tree), head=git.Sha(report.base_commit or ""),
                             head_tree=git.Sha(base_tree))
    tv = view(ctx.repo, tasks, snap)
    claims = {(e.path, h.sha256) for e in report.changes for h in e.hunks}
    sel = select(tv, task, claims)
    doc: DiffResult = {"task": task_id, "base": report.base_commit, "files": [], "patch": "",
                       "from_snapshot": {"snapshot": snap_tree, "revision": report.revision,
                                             "machine": origin, "session": report.session}}
    if not sel.changes:
        return doc
    plan = plan_commit(ctx, tv, task_id, sel.changes)
    return _shown(ctx, doc, base_tree, plan.tree, stat)
