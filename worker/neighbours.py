"""What changed in a task's own files that its report does not carry.

An edit a worker makes in a neighbour's range of a shared file is, by the rules of
attribution, the neighbour's: `worker done` leaves it out, and the neighbour's later
rewrite may make it vanish. Nothing is wrong with the attribution; what was wrong is that
nobody told the worker. So before delivering, `worker done` lists the changed lines of the
files the task holds or touches that the tree's attribution credits to another task, or
to no task at all. It only reads the attribution's results: the rules stay in
shared/hunks.

A neighbour's change its own newest report already claims is left out: that one is known
to be the neighbour's work, not the worker's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hunkwise.shared.hunks.globs import glob_matches, grant_covers
from hunkwise.shared.hunks.taskview import whole_identity
from hunkwise.shared.state.models import report_path

if TYPE_CHECKING:
    from collections.abc import Sequence

    from hunkwise.shared.hunks.diff import FileChange, Hunk
    from hunkwise.shared.hunks.taskview import TreeView
    from hunkwise.shared.state.documents import OutsideChange
    from hunkwise.shared.state.models import Task


def _lines(h: Hunk | None) -> str:
    if h is None:
        return "the whole file"
    if h.old_lines == 0:
        return f"{h.new_lines} line(s) inserted after line {h.old_start}"
    end = h.old_start + h.old_lines - 1
    return f"line {h.old_start}" if end == h.old_start else f"lines {h.old_start}-{end}"


def _own_files(tv: TreeView, task: Task) -> set[str]:
    """The paths the task holds (a range's file, a glob's changed files) or changed."""
    changed = {ch.path for ch in tv.changes}
    mine = {ch.path for ch in tv.task_changes(task.id)}
    for g in task.grants:
        if g.kind != "glob":
            mine.add(g.path)
        else:
            mine.update(p for p in changed if glob_matches(g.path, p))
    return mine


def outside_grants(tv: TreeView, task: Task, tasks: Sequence[Task]) -> list[OutsideChange]:
    """The changes in the task's files that are not its own: another task's or nobody's."""
    files = _own_files(tv, task)
    by_id = {t.id: t for t in tasks}
    out: list[OutsideChange] = []
    for other, changes in sorted(tv.attribution.owned.items()):
        if other == task.id:
            continue
        for ch in changes:
            if ch.path not in files:
                continue
            claimed = set((by_id[other].claimed if other in by_id else {}).get(report_path(ch.path), []))
            whole = not (ch.splittable and ch.hunks)
            for h in _hunks(ch):
                ident = whole_identity(ch) if whole or h is None else tv.attribution.identity(h)
                if ident in claimed:
                    continue  # the neighbour's own report claims it: its work
                grant = _grant_of(by_id.get(other), ch.path)
                out.append({"path": report_path(ch.path), "lines": _lines(h), "task_id": other,
                            "note": f"credited to {other}" + (f" ({grant})" if grant else "")
                                    + ": not in this report"})
    for ch, h in tv.attribution.unowned:
        if ch.path in files:
            out.append({"path": report_path(ch.path), "lines": _lines(h), "task_id": None,
                        "note": "under no grant: never committed"})
    return out


def _hunks(ch: FileChange) -> list[Hunk | None]:
    return list(ch.hunks) if ch.hunks else [None]


def _grant_of(task: Task | None, path: str) -> str | None:
    if task is None:
        return None
    for g in task.grants:
        if grant_covers(g, path):
            return str(g)
    return None


def warning(task_id: str, found: list[OutsideChange]) -> str:
    """One warning line for `worker done`: what, where, and what to do about it."""
    shown = "; ".join(f"{o['path']} {o['lines']} ({o['note']})" for o in found[:5])
    more = f"; and {len(found) - 5} more" if len(found) > 5 else ""
    return (f"{task_id}: changes in your files outside your grants: {shown}{more}. If you "
            "made them, they are not delivered with this report: undo them, or ask the "
            "coordinator for a wider grant (coord grant)")
