"""Where each line grant stands now: its HEAD lines and the working tree's, with a landmark.

Grants are numbered as HEAD holds the file (and re-mapped through every commit), while a
worker sees a file that the others' uncommitted edits keep shifting. Every command that
shows a range shows both numberings, labelled, and the range's first line as it reads now,
so nobody has to translate line numbers by hand.

The tree's numbers come from mapping the grant through the HEAD -> working tree diff of
its file (the same re-mapping a commit applies, shared/hunks/ownership.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hunkwise.shared import git
from hunkwise.shared.hunks.diff import FileChange, split_lines
from hunkwise.shared.hunks.ownership import map_point_span, map_range
from hunkwise.shared.state.models import ChangeEntry, Grant, Task, span_text

if TYPE_CHECKING:
    from hunkwise.shared.hunks.snapshot import Snapshot
    from hunkwise.shared.state.documents import ClaimedFile, ClaimedSpan, GrantPlace

LANDMARK_CHARS = 120


def landmark(lines: list[bytes], n: int) -> str | None:
    """Line `n` (from 1) as text, stripped and cut; None past the end or before line 1."""
    if not 1 <= n <= len(lines):
        return None
    text = lines[n - 1].rstrip(b"\r\n").decode("utf-8", "replace").strip()
    return text if len(text) <= LANDMARK_CHARS else text[:LANDMARK_CHARS - 1] + "…"


def _point_mark(lines: list[bytes], n: int) -> str | None:
    """What a point follows: line `n`, or, when it is blank, the blank line under the
    nearest line that is not."""
    if n == 0:
        return "(top of file)"
    mark = landmark(lines, n)
    if mark:
        return mark
    for k in range(n - 1, 0, -1):
        above = landmark(lines, k)
        if above:
            return f"(a blank line below: {above})"
    return "(a blank line)" if mark is not None else None


def place_of(g: Grant, change: FileChange | None, tree_lines: list[bytes] | None) -> GrantPlace:
    """One grant's place: HEAD lines, tree lines (None when the file is gone or changed as
    a whole), and its landmark (a range's first line, the line a point follows)."""
    head = [g.start, g.end]
    tree: list[int] | None = head
    if change is not None:
        if change.status == "D" or not change.splittable:
            tree = None
        else:
            # Through git's hunks, as a commit re-maps grants (never a division's).
            hunks = change.hunks if change.git_hunks is None else change.git_hunks
            tree = list(map_point_span(g.start, g.end, hunks) if g.kind == "point"
                        else map_range(g.start, g.end, hunks))
    mark = None
    if tree is not None and tree_lines is not None:
        mark = landmark(tree_lines, tree[0])
        if g.kind == "point":
            mark = _point_mark(tree_lines, tree[0])
    return {"grant": str(g), "kind": g.kind, "path": g.path, "symbol": g.symbol,
            "lines": {"head": head, "tree": tree}, "landmark": mark}


def places(repo: Path, tasks: Sequence[Task], changes: Sequence[FileChange],
           tree: str) -> dict[str, list[GrantPlace]]:
    """Each task's line grants (ranges and points) in HEAD's and the working tree's lines.

    `changes` is the HEAD -> `tree` diff (a snapshot of the working tree) that the caller
    has already read, with its -U0 hunks; the tree's bytes are read for the landmarks."""
    by_path = {c.path: c for c in changes}
    paths = sorted({g.path for t in tasks for g in t.grants if g.kind != "glob"})
    texts: dict[str, list[bytes]] = {}
    if paths:
        found = git.read_objects(repo, [f"{tree}:{p}" for p in paths])
        for p, obj in zip(paths, found, strict=True):
            if obj is not None and obj[1] == "blob":
                texts[p] = split_lines(obj[2])
    out: dict[str, list[GrantPlace]] = {}
    for t in tasks:
        out[t.id] = [place_of(g, by_path.get(g.path), texts.get(g.path))
                     for g in t.grants if g.kind != "glob"]
    return out


def place_text(p: GrantPlace) -> str:
    """A grant where it stands, both numberings labelled, e.g.
    `f.py::partition_all HEAD 702-751 · tree 739-788 · def partition_all(n, seq):` or
    `f.py::__all__+ HEAD +12 · tree +14 · after: 'partition',` (the landmark last, as the
    line reads)."""
    head, tree = p["lines"]["head"], p["lines"]["tree"]
    point = p["kind"] == "point"
    if p["symbol"]:
        name = f"{p['path']}::{p['symbol']}" + ("+" if point else "")
    else:
        name = p["path"]
    def span(ab: list[int]) -> str:
        if point:
            return f"+{ab[0]}" if ab[1] <= ab[0] else f"+{ab[0]}-{ab[1]}"
        if ab[1] < ab[0]:
            return f"+{ab[0] - 1} (empty)"
        return span_text(ab[0], ab[1])
    now = "gone from the tree" if tree is None else f"tree {span(tree)}"
    mark = p["landmark"]
    tail = "" if not mark else (f" · after: {mark}" if point else f" · {mark}")
    return f"{name} HEAD {span(head)} · {now}{tail}"


def tree_places(repo: Path, tasks: Sequence[Task],
                snap: Snapshot | None = None) -> dict[str, list[GrantPlace]]:
    """`places` of the working tree, for commands that hold no tree view of their own:
    from `snap` when the command has just read the tree, else from a new snapshot.

    Never fails the command: a tree that keeps changing under the snapshot (exit 3
    "retry" anywhere else) leaves the places out this once."""
    from hunkwise.shared.errors import CoordError
    from hunkwise.shared.hunks import diff, snapshot

    paths = sorted({g.path for t in tasks for g in t.grants if g.kind != "glob"})
    if not paths:
        return {t.id: [] for t in tasks}
    try:
        snap = snapshot.take(repo) if snap is None else snap
        changes = diff.diff_trees(repo, snap.head_tree, snap.tree, paths)
        return places(repo, tasks, changes, snap.tree)
    except CoordError:
        return {t.id: [] for t in tasks}


# ---- what a task claims, in the tree's lines -------------------------------------------------

def claimed_files(changes: Sequence[FileChange] | Sequence[ChangeEntry]) -> list[ClaimedFile]:
    """A task's changes (as attributed now, HEAD -> working tree; or a report's entries,
    numbered the same way) per file: each hunk's lines in the tree and at HEAD, and what
    it adds and removes."""
    from hunkwise.shared.state.models import report_path

    out: list[ClaimedFile] = []
    for ch in changes:
        spans: list[ClaimedSpan] = []
        for h in ch.hunks:
            tree = ([h.new_start, h.new_start + h.new_lines - 1] if h.new_lines
                    else [h.new_start + 1, h.new_start])
            head = ([h.old_start, h.old_start + h.old_lines - 1] if h.old_lines
                    else [h.old_start + 1, h.old_start])
            spans.append({"tree": tree, "head": head, "added": h.new_lines, "removed": h.old_lines})
        out.append({"path": report_path(ch.path), "kind": ch.kind,
                    "added": sum(s["added"] for s in spans),
                    "removed": sum(s["removed"] for s in spans), "spans": spans})
    return out


def claimed_text(files: Sequence[ClaimedFile], most: int = 8) -> list[str]:
    """`mod.py +5 -1: 17-20 (+4), 25 (+1 -1), after 30 (-2)` per file, in the tree's lines."""
    lines = []
    for f in files:
        if not f["spans"]:
            lines.append(f"{f['path']}: {f['kind']} (whole file)")
            continue
        parts = []
        for s in f["spans"][:most]:
            a, b = s["tree"]
            where = f"after {b}" if b < a else span_text(a, b)
            counts = " ".join(x for x in (f"+{s['added']}" if s["added"] else "",
                                          f"-{s['removed']}" if s["removed"] else "") if x)
            parts.append(f"{where} ({counts})")
        more = f", +{len(f['spans']) - most} more" if len(f["spans"]) > most else ""
        kind = "" if f["kind"] == "modified" else f" [{f['kind']}]"
        lines.append(f"{f['path']}{kind} +{f['added']} -{f['removed']}: {', '.join(parts)}{more}")
    return lines
