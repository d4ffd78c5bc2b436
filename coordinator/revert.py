"""`coord revert ID`: commit the exact inverse of a task's accepted commit."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hunkwise.coordinator import journal
from hunkwise.shared import git
from hunkwise.shared.errors import StateRefused, UsageError
from hunkwise.shared.git import objects
from hunkwise.shared.git.worktree import current_oids, write_entries
from hunkwise.shared.hunks import diff
from hunkwise.shared.hunks.taskview import sync_ranges
from hunkwise.shared.state import store
from hunkwise.shared.state.context import Ctx, get_task
from hunkwise.shared.state.models import Note, Task, TaskState

if TYPE_CHECKING:
    from hunkwise.shared.state.documents import RevertResult


def revert(ctx: Ctx, task_id: str) -> RevertResult:
    with store.locked(ctx.lay, name="commit"):
        journal.settle(ctx)  # a crashed accept first: its task may be the one reverted
        return _revert(ctx, task_id)


def _revert(ctx: Ctx, task_id: str) -> RevertResult:
    with store.locked(ctx.lay):
        state = store.load(ctx.lay)
        # An earlier batch's task was moved to the archive at thaw: bring it back.
        task = get_task(state, task_id, lay=ctx.lay)
        if state.freeze is not None:
            raise StateRefused(f"coord revert {task_id} refused: a release freeze is in force")
        if task.state == TaskState.REVERTED:
            by = reverted_by(task) or "an earlier revert"
            raise StateRefused(f"{task_id} is already reverted by {by[:12]}; nothing was committed")
        if task.state != TaskState.ACCEPTED or not task.commit:
            raise StateRefused(f"{task_id} is {task.state}; only an accepted task can be reverted")
        commit = task.commit
        head = git.head(ctx.repo)
        rc, _ = git.run_rc(ctx.repo, "merge-base", "--is-ancestor", commit, head or "HEAD")
        if head is None or rc != 0:
            raise UsageError(f"{task_id}'s commit {commit[:12]} is not in HEAD's history")
        parent = git.run(ctx.repo, "rev-parse", f"{commit}^").decode().strip()
        own = diff.diff_trees(ctx.repo, parent, commit)
        paths = [c.path for c in own]
        later = {c.path: c for c in diff.diff_trees(ctx.repo, commit, head, paths)}
        entries: dict[str, tuple[str, str] | None] = {}
        problems: list[str] = []
        split = [c for c in own if c.splittable and c.hunks and
                 (c.path not in later or later[c.path].splittable)]
        head_blobs = git.cat_blobs(ctx.repo, [later[c.path].new_oid if c.path in later else c.new_oid
                                              for c in split])
        contents: list[bytes] = []
        for c in own:
            if c.path in {s.path for s in split}:
                continue
            if c.path in later:
                problems.append(f"{c.path}: changed again after {commit[:12]}")
            else:
                entries[c.path] = None if c.status == "A" else (c.old_mode, c.old_oid)
        kept: list[tuple[str, str]] = []
        moved_by_path: dict[str, list[diff.Hunk]] = {}
        for c in split:
            inv = [diff.inverse(h) for h in c.hunks]
            through = later[c.path].hunks if c.path in later else []
            moved, clashes = diff.carry(inv, through)
            for h in clashes:
                problems.append(f"{c.path}: lines {h.old_start}-{h.old_end} were changed again "
                                f"after {commit[:12]}")
            if clashes:
                continue
            base_oid = later[c.path].new_oid if c.path in later else c.new_oid
            try:
                contents.append(diff.splice(head_blobs[base_oid], moved))
            except ValueError as e:
                problems.append(f"{c.path}: {e}")
                continue
            kept.append((c.path, c.new_mode))
            moved_by_path[c.path] = moved
        if problems:
            raise StateRefused(f"cannot revert {task_id}: " + "; ".join(problems[:10]))
        for (path, mode), oid in zip(kept, objects.hash_blobs(ctx.repo, contents), strict=True):
            entries[path] = (mode, oid)
        tree = objects.build_tree(ctx.repo, git.head_tree(ctx.repo), entries)
        subject = git.run(ctx.repo, "log", "-1", "--format=%s", commit).decode().strip()
        msg = (f'Revert "{subject}"\n\nThis reverts commit {commit}.\n\nCoord-Task: {task_id}\n')
        new = git.run(ctx.repo, "commit-tree", tree, "-p", head, input=msg.encode()).decode().strip()
        rc, _ = git.run_rc(ctx.repo, "update-ref", "-m", f"coord revert {task_id}", "HEAD", new, head,
                           env={"HUNKWISE_COORDINATOR": "1"})
        if rc != 0:
            raise StateRefused("HEAD moved while reverting; try again")
        warning = journal.reset_index_paths(ctx, entries)
        tree_left = _update_tree(ctx, head, entries, moved_by_path)
        sync_ranges(ctx.repo, state)
        task.notes.append(_note_reverted(new))
        task.state = TaskState.REVERTED
        task.updated_at = store.now()
        store.save(ctx.lay, state)
    return {"commit": new, "task": task_id, "state": str(task.state), "reverts": commit,
            "paths": sorted(entries),
            "tree_left": tree_left, "warnings": [warning] if warning else []}


def _update_tree(ctx: Ctx, old_head: str, entries: dict[str, tuple[str, str] | None],
                 moved: dict[str, list[diff.Hunk]]) -> list[str]:
    """Bring the reverted paths of the working tree along, keeping everyone's edits.

    A path nobody edited since gets the new blob; a text file with uncommitted edits gets
    the same inverse hunks carried across those edits. Where they touch the same lines,
    the file is left as it is and named to the caller.
    """
    now = current_oids(ctx.repo, list(entries), write=True)
    old: dict[str, str | None] = {}
    for path in entries:
        rc, out = git.run_rc(ctx.repo, "rev-parse", "-q", "--verify", f"{old_head}:{path}")
        old[path] = out.decode().strip() if rc == 0 else None
    clean = {p: e for p, e in entries.items() if now.get(p) == old[p]}
    dirty = [p for p in entries if p not in clean and p in moved and now.get(p) and old[p]]
    left = sorted(set(entries) - set(clean) - set(dirty))
    contents: list[bytes] = []
    carried: list[tuple[str, str]] = []
    if dirty:
        blobs = git.cat_blobs(ctx.repo, [now[p] or "" for p in dirty])
        for p in dirty:
            w_oid = now[p] or ""
            edits = diff.blob_hunks(ctx.repo, old[p] or "", w_oid)
            hunks, clashes = diff.carry(moved[p], edits)
            if clashes:
                left.append(p)
                continue
            try:
                contents.append(diff.splice(blobs[w_oid], hunks))
            except ValueError:
                left.append(p)
                continue
            carried.append((p, (entries[p] or ("100644", ""))[0]))
    new = dict(clean)
    for (p, mode), oid in zip(carried, objects.hash_blobs(ctx.repo, contents), strict=True):
        new[p] = (mode, oid)
    if new:
        write_entries(ctx.repo, new, expect={p: (now[p] if p not in clean else old[p]) for p in new})
    return sorted(left)


def _note_reverted(commit: str) -> Note:
    return Note(at=store.now(), by="coordinator", kind="reverted", text=f"{REVERTED_BY}{commit}")


REVERTED_BY = "reverted by "


def reverted_by(task: Task) -> str | None:
    """The commit that reverted the task, as its note recorded it."""
    for n in reversed(task.notes):
        if n.kind == "reverted" and n.text.startswith(REVERTED_BY):
            return n.text.removeprefix(REVERTED_BY).strip()
    return None
