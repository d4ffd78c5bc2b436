"""A report's outcomes other than accept: request changes, reject (optionally discarding its
changes), defer to the next batch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hunkwise import inbox
from hunkwise.shared import git
from hunkwise.shared.errors import StateRefused, UsageError
from hunkwise.shared.git import objects
from hunkwise.shared.git.worktree import write_entries
from hunkwise.shared.hunks import diff
from hunkwise.shared.hunks.diff import FileChange
from hunkwise.shared.hunks.taskview import (
    TreeView,
    active_tasks,
    claims_of,
    may_still_claim,
    moved_by_discard,
    select,
    sync_ranges,
    view,
    view_with,
)
from hunkwise.shared.state import store
from hunkwise.shared.state.context import Ctx, get_task
from hunkwise.shared.state.models import Note, TaskState, report_path
from hunkwise.shared.work import recovery

if TYPE_CHECKING:
    from hunkwise.shared.state.documents import DeferResult, RejectResult, RequestChangesResult
    from hunkwise.shared.state.models import State


def _note(text: str, kind: str) -> Note:
    if not text.strip():
        raise UsageError("--note must say something")
    return Note(at=store.now(), by="coordinator", kind=kind, text=text)


def request_changes(ctx: Ctx, task_id: str, note: str, *,
                    relaunch: bool | None = None) -> RequestChangesResult:
    """Send the task back with a note, and a CHANGES_REQUESTED signal to its worker's
    session; `relaunch` (default `[launch] relaunch`) starts its launched agent again,
    the note first in its prompt (coordinator/launch.py)."""
    from hunkwise.coordinator import launch
    from hunkwise.coordinator.sessions import coordinator_session
    from hunkwise.shared.state.models import SignalType
    from hunkwise.shared.state.signals import send

    n = _note(note, "changes_requested")
    again = launch.wants_relaunch(ctx, relaunch)
    with store.transaction(ctx.lay) as state:
        task = get_task(state, task_id, archive=ctx.lay)
        if task.state not in (TaskState.REPORTED, TaskState.IN_PROGRESS):
            raise StateRefused(f"{task_id} is {task.state}; changes can be requested of a "
                               "reported task")
        if relaunch and task.launch is None:
            raise StateRefused(f"{task_id} was never launched: --relaunch has no agent to "
                               f"start again (coord launch {task_id} --agent NAME)")
        task.state = TaskState.CHANGES_REQUESTED
        task.notes.append(n)
        to = task.session
        task.claim = None
        task.updated_at = n.at
        if to is not None:
            send(state, sender=coordinator_session(), to=to, kind=SignalType.CHANGES_REQUESTED,
                 about=task_id, payload=note)
        launched = task.launch is not None
    for e in inbox.find_task_reports(ctx.lay.inbox, task_id):
        inbox.archive(e)
    doc: RequestChangesResult = {"task": task.public(), "note": note}
    if again and launched:
        doc["relaunched"] = launch.relaunch(ctx, task_id, note)
    return doc


def defer(ctx: Ctx, task_id: str) -> DeferResult:
    with store.transaction(ctx.lay) as state:
        task = get_task(state, task_id, archive=ctx.lay)
        if not task.active:
            raise StateRefused(f"{task_id} is {task.state}; only active tasks can be deferred")
        task.state = TaskState.DEFERRED
        task.batch = state.batch + 1
        task.claim = None
        task.updated_at = store.now()
    return {"task": task.public()}


def discard_entries(ctx: Ctx, tv: TreeView, task_id: str,
                    mine: list[FileChange] | None = None) -> dict[str, tuple[str, str] | None]:
    """Working-tree entries that remove exactly the task's changes and keep the rest."""
    if mine is None:
        mine = tv.task_changes(task_id)
    split = [c for c in mine if c.splittable and c.hunks]
    blobs = git.cat_blobs(ctx.repo, [c.new_oid for c in split])
    entries: dict[str, tuple[str, str] | None] = {}
    contents: list[bytes] = []
    for c in mine:
        if c.splittable and c.hunks:
            contents.append(diff.splice(blobs[c.new_oid], [diff.inverse(h) for h in c.hunks]))
        elif c.status == "A":
            entries[c.path] = None
        else:
            entries[c.path] = (c.old_mode, c.old_oid)
    for c, oid in zip(split, objects.hash_blobs(ctx.repo, contents), strict=True):
        entries[c.path] = (c.new_mode, oid)
    return entries


def _refuse_moves(ctx: Ctx, tv: TreeView, state: State, task_id: str,
                  entries: dict[str, tuple[str, str] | None]) -> None:
    """Refuse a discard after which another task's changes would not be what they are:
    the tree as the discard leaves it, divided again, must give every other task the same
    text on each file the discard splices (taskview.moved_by_discard)."""
    texts = {p: e for p, e in entries.items() if e is not None and p in tv.old_texts}
    if not texts:
        return
    tasks = active_tasks(state)
    after = view_with(ctx.repo, tv, tasks, texts, without=task_id)
    moved = moved_by_discard(tv, after, tasks, task_id, set(texts))
    if moved:
        raise StateRefused(f"cannot discard exactly {task_id}'s changes: {'; '.join(moved[:5])} "
                           "would change with them (equal lines beside them leave the place "
                           "of its lines open); nothing was written")


def reject(ctx: Ctx, task_id: str, note: str, discard: bool) -> RejectResult:
    n = _note(note, "rejected")
    with store.locked(ctx.lay, name="commit"), store.locked(ctx.lay):
        state = store.load(ctx.lay)
        task = get_task(state, task_id, archive=ctx.lay)
        if not task.active:
            raise StateRefused(f"{task_id} is {task.state} already")
        if discard and state.freeze is not None:
            raise StateRefused("--discard changes the tree, which a release freeze forbids")
        sync_ranges(ctx.repo, state)
        discarded: list[str] = []
        if discard:
            tv = view(ctx.repo, active_tasks(state))
            # Everything the task's report claimed goes, its boundary changes included, so
            # no change of its migrates to a neighbour once its grant is released.
            sel = select(tv, task, claims_of(task))
            unproven = []
            for amb in sel.claimed_ambiguous:
                path = report_path(amb.change.path)
                for other_id in amb.tasks:
                    other = state.tasks.get(other_id)
                    why = other and other_id != task_id and may_still_claim(other, path, amb.canon)
                    if why:
                        unproven.append(f"{path} line {amb.hunk.old_start} ({why})")
            if unproven:
                raise StateRefused(f"cannot prove these changes are {task_id}'s: "
                                   f"{'; '.join(unproven[:10])}; nothing was written")
            entries = discard_entries(ctx, tv, task_id, sel.changes)
            _refuse_moves(ctx, tv, state, task_id, entries)
            before = {c.path: (None if c.status == "D" else c.new_oid) for c in sel.changes}
            write_entries(ctx.repo, entries, expect=before)
            discarded = sorted(entries)
        task.state = TaskState.REJECTED
        task.notes.append(n)
        task.claim = None
        task.saved = None  # a rejected task's work is never restored
        task.updated_at = n.at
        store.save(ctx.lay, state)
    for e in inbox.find_task_reports(ctx.lay.inbox, task_id):
        inbox.archive(e)
    recovery.forget(ctx.repo, task_id)
    return {"task": task.public(), "discarded": discarded}
