"""Recovery: what of a task's recorded work is gone from the tree, and putting it back.

Every report, and every worker command of an in-progress task, records the task's changes
(shared/work/recovery.py); `coord status` lists what of them is gone, and `coord restore` puts
it back, touching nothing else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hunkwise.shared import git
from hunkwise.shared.errors import StateRefused, UsageError
from hunkwise.shared.machines.handover import put_back
from hunkwise.shared.state import store
from hunkwise.shared.state.context import Ctx, get_task
from hunkwise.shared.state.models import TaskState
from hunkwise.shared.work import recovery

if TYPE_CHECKING:
    from collections.abc import Callable

    from hunkwise.shared.hunks.taskview import TreeView
    from hunkwise.shared.state.documents import LostWork, RestoreResult
    from hunkwise.shared.state.models import State, Task


def lost_tasks(ctx: Ctx, tasks: list[Task], tv: TreeView, state: State | None = None) -> list[LostWork]:
    """Active tasks whose recorded changes (reported or not) are partly gone from the tree.

    `coord status` calls this with its tree view (and the state it read), so it also
    records the in-progress tasks' unreported work where it changed (cheap when nothing
    did). One existence check and one diff per base serve every task (recovery.losses_of).
    """
    from hunkwise.shared.errors import CoordError

    state = store.load(ctx.lay) if state is None else state
    running = [t.id for t in tasks if t.state == TaskState.IN_PROGRESS]
    try:
        losses = recovery.record_wip(ctx, state, tv, running) if running else {}
    except CoordError:
        running, losses = [], {}  # the lock is busy: only list, record next time
    # The in-progress tasks not recorded now hold their record in this tree: nothing lost.
    losses = recovery.read_jointly(ctx.repo, state, {
        **{t.id: recovery.Loss([], {}) for t in tasks if t.id in running}, **losses}, tv)
    lost: list[LostWork] = []
    for t in sorted(tasks, key=lambda t: t.id):
        if not t.active or t.saved is None:
            continue
        gone = losses.get(t.id)
        if gone is not None and gone.paths:
            lost.append({"task": t.id, "paths": gone.paths})
    return lost


def _kept(ctx: Ctx, state: State, task: Task) -> Callable[[str], set[str]]:
    """Given the tree a restore reads, the files where the task's recorded changes seem
    gone as git aligns the tree with the base, but every reading of the file by all tasks'
    records keeps them (recovery.settle_jointly): a restore writes nothing there."""

    def kept(now_tree: str) -> set[str]:
        actives = [t for t in state.tasks.values() if t.active]
        losses = recovery.losses_of(ctx.repo, actives, now_tree)
        if not losses.get(task.id, recovery.Loss([], {})).hunks:
            return set()
        return {p for tid, p in recovery.settle_jointly(ctx.repo, actives, losses, now_tree)
                if tid == task.id}
    return kept


def restore(ctx: Ctx, task_id: str) -> RestoreResult:
    with store.locked(ctx.lay, name="commit"):
        return _restore(ctx, task_id)


def _restore(ctx: Ctx, task_id: str) -> RestoreResult:
    """Put back what is gone of the task's recorded revision, touching nothing else.

    Only the revision the state recorded for the task (its report's, or the snapshot a
    worker command took of its unreported work) is used, never a file of the inbox; only
    while the task is active, and only inside its grants. Each change is picked by its
    place and its bytes, so another task's identical line is never taken for it.
    """
    state = store.load(ctx.lay)
    task = get_task(state, task_id)
    if state.freeze is not None:
        raise StateRefused("coord restore changes the tree, which a release freeze forbids")
    if not task.active:
        raise StateRefused(f"{task_id} is {task.state}: its work is no longer restored; "
                           "nothing was written")
    saved = task.saved
    if saved is None:
        raise UsageError(f"{task_id} has no recorded work to restore (nothing was recorded "
                         "since it started: no report, and no worker command saw changes)")
    for oid in filter(None, (saved.base, saved.tree)):
        if git.run_rc(ctx.repo, "cat-file", "-e", oid)[0] != 0:
            raise UsageError(f"{task_id}'s snapshot {oid[:12]} is gone from the repository")
    restored = put_back(ctx.repo, task, saved, what=f"restore {task_id}",
                        clash="were changed by someone else since", kept=_kept(ctx, state, task))
    return {"task": task_id, "restored": restored,
            "revision": saved.revision, "kind": saved.kind}
