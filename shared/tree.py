"""The task view of the working tree: who owns which change, as report entries.

Both sides use this: the worker to build its report, the coordinator to check a report
against the real diff. Identities are content-based (a hunk's removed and added bytes),
so another task's commit that only shifts lines leaves them unchanged.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from . import diff, git
from .diff import FileChange
from .errors import GitError
from .models import ChangeEntry, Grant, HunkEntry, State, Task, TaskState, report_path
from .ownership import Attribution, attribute, map_range

Identity = tuple[str, ...]


@dataclass
class TreeView:
    snap: diff.Snapshot
    changes: list[FileChange]
    attribution: Attribution

    def task_changes(self, task_id: str) -> list[FileChange]:
        return self.attribution.owned.get(task_id, [])


def view(repo: Path, tasks: Sequence[Task]) -> TreeView:
    snap = diff.snapshot(repo)
    changes = diff.diff_trees(repo, snap.head_tree, snap.tree)
    return TreeView(snap, changes, attribute(changes, tasks))


def _is_whole(ch: FileChange | ChangeEntry) -> bool:
    if isinstance(ch, FileChange):
        return not (ch.splittable and ch.hunks)
    return not (ch.kind == "modified" and ch.old_mode == ch.new_mode and ch.hunks
                and (ch.new_mode or "100644") in diff.REGULAR_MODES)


def to_entries(changes: Sequence[FileChange]) -> list[ChangeEntry]:
    """Report entries; a deletion and an addition of the same blob become one rename."""
    entries: list[ChangeEntry] = []
    deleted = {(c.old_oid, c.old_mode): c for c in changes if c.status == "D"}
    used: set[str] = set()
    renamed: set[str] = set()
    for c in changes:
        if c.status == "A" and (c.new_oid, c.new_mode) in deleted:
            src = deleted.pop((c.new_oid, c.new_mode))
            used.add(src.path)
            renamed.add(c.path)
            entries.append(ChangeEntry(path=report_path(c.path), kind="renamed",
                                       old_path=report_path(src.path),
                                       old_mode=src.old_mode, new_mode=c.new_mode,
                                       old_oid=src.old_oid, new_oid=c.new_oid, hunks=[]))
    for c in changes:
        if c.path in used or c.path in renamed:
            continue
        entries.append(ChangeEntry(
            path=report_path(c.path), kind=c.kind,
            old_mode=None if c.old_mode == "000000" else c.old_mode,
            new_mode=None if c.new_mode == "000000" else c.new_mode,
            old_oid=None if c.old_oid == diff.NULL_OID else c.old_oid,
            new_oid=None if c.new_oid == diff.NULL_OID else c.new_oid,
            hunks=[HunkEntry(old_start=h.old_start, old_lines=h.old_lines, new_start=h.new_start,
                             new_lines=h.new_lines, sha256=h.sha256) for h in c.hunks]))
    entries.sort(key=lambda e: e.path)
    return entries


def identities(entries: Sequence[ChangeEntry]) -> dict[str, Counter[Identity]]:
    """Per path, the multiset of position-free identities of its changes."""
    out: dict[str, Counter[Identity]] = {}
    for e in entries:
        if e.kind == "renamed" and e.old_path:
            out.setdefault(e.old_path, Counter())[("deleted",)] += 1
            out.setdefault(e.path, Counter())[("added", e.new_mode or "", e.new_oid or "")] += 1
            continue
        bucket = out.setdefault(e.path, Counter())
        if e.regions:
            for r in e.regions:
                bucket[("region", r)] += 1
            continue
        if _is_whole(e):
            if e.kind == "deleted":
                bucket[("deleted",)] += 1
            else:
                bucket[("whole", e.kind, e.new_mode or "", e.new_oid or "")] += 1
        else:
            for h in e.hunks:
                bucket[("hunk", h.sha256)] += 1
    return out


def add_regions(repo: Path, entries: list[ChangeEntry], changes: Sequence[FileChange],
                task: Task) -> None:
    """Give range-granted files an identity per range instead of per hunk.

    How git's -U0 diff splits an edit into hunks can change when other lines of the file
    change (line frequencies steer its tie-breaks), though this task's edit did not: a
    report made before another task's commit would then look stale. A range's lines before
    and after the task's edits do not depend on that split.
    """
    from .diff import hunk_digest, splice, split_lines
    from .ownership import range_relation

    ranges: dict[str, list[Grant]] = {}
    for g in task.grants:
        if g.kind == "range":
            ranges.setdefault(g.path, []).append(g)
    todo = [c for c in changes if c.path in ranges and c.splittable and c.hunks]
    if not todo:
        return
    blobs = git.cat_blobs(repo, [c.old_oid for c in todo])
    by_path = {e.path: e for e in entries}
    for c in todo:
        entry = by_path.get(report_path(c.path))
        if entry is None:
            continue
        held = [[h for h in c.hunks if range_relation(g, h) == "in"] for g in ranges[c.path]]
        if sum(len(hs) for hs in held) != len(c.hunks) or any(
                len([1 for hs in held if h in hs]) != 1 for h in c.hunks):
            continue  # some hunk is not held by exactly one range: keep hunk identities
        old = split_lines(blobs[c.old_oid])
        digests = []
        for g, hs in zip(ranges[c.path], held, strict=True):
            if not hs:
                continue
            new = split_lines(splice(blobs[c.old_oid], hs))
            delta = sum(h.new_lines - h.old_lines for h in hs)
            digests.append(hunk_digest(b"".join(old[g.start - 1:g.end]),
                                       b"".join(new[g.start - 1:g.end + delta])))
        entry.regions = sorted(digests)


def patch_digest(entries: Sequence[ChangeEntry]) -> str:
    h = hashlib.sha256()
    for path, ids in sorted(identities(entries).items()):
        for ident, n in sorted(ids.items()):
            h.update(repr((path, ident, n)).encode("utf-8", "surrogateescape"))
    return h.hexdigest()


# ---- range grants follow history ----------------------------------------------------------

def sync_ranges(repo: Path, state: State) -> bool:
    """Re-map every active range grant from `state.ranges_at` to HEAD; True if changed.

    A hunk at the edge of a range goes with what the range's own rule says: an insertion
    right before START pushes the range down, one right after END stays outside.
    """
    head = git.head(repo)
    if head is None or state.ranges_at == head:
        return False
    old = state.ranges_at
    state.ranges_at = head
    paths = sorted({g.path for t in state.tasks.values() if t.active
                    for g in t.grants if g.kind == "range"})
    if old is None or not paths:
        return True
    try:
        changes = diff.diff_trees(repo, old, head, paths)
    except GitError:
        return True  # the old commit is gone (history rewritten): keep ranges as they are
    by_path = {c.path: c for c in changes}
    for t in state.tasks.values():
        if not t.active:
            continue
        for g in t.grants:
            if g.kind != "range" or g.path not in by_path:
                continue
            ch = by_path[g.path]
            if ch.status == "D":
                continue
            g.start, g.end = map_range(g.start, g.end, ch.hunks)
    return True


def active_tasks(state: State) -> list[Task]:
    return [t for t in state.tasks.values() if t.state not in (TaskState.ACCEPTED, TaskState.REJECTED)]
