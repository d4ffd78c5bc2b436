"""Grants, the conflict rules, attribution of hunks to tasks, and range re-mapping.

Rules (shared/SPEC.md, "Ownership rules"):
- one writer per file, unless two tasks hold disjoint line ranges of it, or insertion
  points (`PATH:+N`), which never conflict with each other and conflict with another
  task's range only strictly inside it (START <= N < END);
- overlapping globs conflict: on the files that exist, and conservatively on the patterns
  themselves for files not yet created;
- `--exclusive` tasks and `[ownership] serial` paths exclude every other grant on their files;
- a hunk belongs to a range grant when every removed line lies in the range, or, for an
  insertion after old line p, when START-1 <= p <= END, at some placement that yields the
  same file, and no placement lies only inside other tasks' grants; placements inside two
  tasks' grants exclusively make it ambiguous. Anything else is unowned or a conflict,
  and neither is ever staged.
"""

from __future__ import annotations

import bisect
import fnmatch
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hunkwise.shared.hunks.diff import FileChange, Hunk
from hunkwise.shared.hunks.globs import glob_matches
from hunkwise.shared.state.models import GlobGrant, Grant, RangeGrant, Task

if TYPE_CHECKING:
    from hunkwise.shared.hunks.regions import Evidence

_WILD = re.compile(r"[*?\[]")


def serial_matches(patterns: Sequence[str], path: str) -> bool:
    return any(glob_matches(p, path) for p in patterns)


_NOT_LITERAL = re.compile(r"[*?\[\\]")  # a backslash escapes what follows (`note\ `): not literal


def _literal_prefix(pattern: str) -> str:
    p = pattern.lstrip("/")
    m = _NOT_LITERAL.search(p)
    return p[: m.start()] if m else p


def _segments_disjoint(a: str, b: str) -> bool:
    """Can no single path segment match both `a` and `b`? (no `**` here)"""
    wa, wb = bool(_WILD.search(a)), bool(_WILD.search(b))
    if not wa and not wb:
        return a != b
    if not wa:
        return not fnmatch.fnmatchcase(a, b)
    if not wb:
        return not fnmatch.fnmatchcase(b, a)
    pa, pb = _literal_prefix(a), _literal_prefix(b)
    if not (pa.startswith(pb) or pb.startswith(pa)):
        return True
    sa, sb = re.split(r"[*?\]]", a)[-1], re.split(r"[*?\]]", b)[-1]
    return not (sa.endswith(sb) or sb.endswith(sa))


def patterns_may_overlap(a: str, b: str) -> bool:
    """Conservative: could some not-yet-existing file match both root-anchored patterns?

    A pattern that matches a directory covers everything below it, so two patterns are
    apart only when, segment by segment from the root, one of their shared leading
    segments can match no common name. `**` matches any depth: past it, assume overlap.
    """
    sa = filter(None, a.strip("/").split("/"))  # the non-empty segments, read as far as needed
    sb = filter(None, b.strip("/").split("/"))
    for x, y in zip(sa, sb, strict=False):
        if x == "**" or y == "**":
            return True
        if _segments_disjoint(x, y):
            return False
    return True


def grant_files(grant: Grant, files: Sequence[str]) -> set[str]:
    """The files a grant covers; `files` must be sorted (a literal prefix narrows the scan)."""
    if grant.kind != "glob":
        return {grant.path}
    prefix = _literal_prefix(grant.path)
    start = bisect.bisect_left(files, prefix)
    out = set()
    for f in itertools.islice(files, start, None):
        if not f.startswith(prefix):
            break
        if glob_matches(grant.path, f):
            out.add(f)
    return out


@dataclass(frozen=True)
class Conflict:
    task_id: str
    path: str
    ours: str
    theirs: str


def find_conflicts(
    new_grants: Sequence[Grant],
    exclusive: bool,
    others: Sequence[Task],
    files: Sequence[str],
    serial: Sequence[str],
) -> list[Conflict]:
    """Every clash between `new_grants` and the grants of active tasks `others`."""
    found: list[Conflict] = []
    files = sorted(files)
    new_files = [grant_files(g, files) for g in new_grants]
    for task in others:
        if not task.active:
            continue
        for theirs in task.grants:
            # A glob's files matter only where ours hold some (their intersection); the
            # patterns alone decide the rest.
            their_files: set[str] | None = None
            for ours, our_files in zip(new_grants, new_files, strict=False):
                if their_files is None and (our_files or theirs.kind != "glob"):
                    their_files = grant_files(theirs, files)
                hit = _clash(ours, our_files, theirs, their_files or set(),
                             exclusive or task.exclusive, serial)
                if hit is not None:
                    found.append(Conflict(task.id, hit, str(ours), str(theirs)))
    return found


def _clash(ours: Grant, our_files: set[str], theirs: Grant, their_files: set[str],
           exclusive: bool, serial: Sequence[str]) -> str | None:
    common = our_files & their_files
    for path in sorted(common) if common else ():
        if exclusive or serial_matches(serial, path):
            return path
        if ours.kind != "glob" and theirs.kind != "glob":
            if lines_clash(ours, theirs):
                return path
            continue
        return path
    # Files that do not exist yet: decide on the patterns themselves.
    if ours.kind == "glob" and theirs.kind == "glob":
        if patterns_may_overlap(ours.path, theirs.path):
            return _literal_prefix(ours.path) or ours.path
    elif ours.kind == "glob":
        if not their_files or theirs.path not in our_files:
            if glob_matches(ours.path, theirs.path):
                return theirs.path
    elif theirs.kind == "glob":
        if glob_matches(theirs.path, ours.path):
            return ours.path
    return None


def lines_clash(a: Grant, b: Grant) -> bool:
    """Do two line grants of one file clash? Ranges when they share a line; points never
    with each other (several tasks insert at one point); a point with a range when one of
    the point's positions lies strictly inside it (START <= N < END): at its edge, it
    does not."""
    if a.kind == "point" and b.kind == "point":
        return False
    if b.kind == "point":
        a, b = b, a
    if a.kind == "point":  # positions a.start..a.end (widened by lines committed there)
        return a.start < b.end and b.start <= a.end
    return a.start <= b.end and b.start <= a.end


# ---- attribution -----------------------------------------------------------------------

@dataclass
class Ambiguous:
    """A change whose placements lie exclusively inside different tasks' grants."""

    change: FileChange
    hunk: Hunk                      # as git printed it
    canon: str                      # identity whatever the placement (slide.canonical)
    tasks: list[str]
    placed: dict[str, Hunk]         # task id -> a placement inside that task's grant
    reason: str = ""                # why the file alone cannot tell (shared/hunks/regions.py)


@dataclass
class Attribution:
    """Who owns each change of the tree."""

    owned: dict[str, list[FileChange]] = field(default_factory=dict)  # task id -> changes
    unowned: list[tuple[FileChange, Hunk | None]] = field(default_factory=list)
    conflicts: list[tuple[FileChange, Hunk | None, list[str]]] = field(default_factory=list)
    ambiguous: list[Ambiguous] = field(default_factory=list)
    canon: dict[int, str] = field(default_factory=dict)  # id(hunk) -> canonical identity
    placed: dict[int, Hunk] = field(default_factory=dict)  # id(hunk) -> inside its owner's grant
    at_point: set[int] = field(default_factory=set)  # id(hunk) of lines at shared points

    def add(self, task_id: str, change: FileChange, hunk: Hunk | None) -> None:
        bucket = self.owned.setdefault(task_id, [])
        if bucket and bucket[-1].path == change.path:
            if hunk is not None:
                bucket[-1].hunks.append(hunk)
            return
        part = FileChange(change.path, change.status, change.old_mode, change.new_mode,
                          change.old_oid, change.new_oid, change.binary,
                          [hunk] if hunk is not None else list(change.hunks))
        bucket.append(part)

    def identity(self, hunk: Hunk) -> str:
        """The hunk's identity whatever placement git printed."""
        return self.canon.get(id(hunk)) or hunk.sha256

    def place(self, hunk: Hunk) -> Hunk:
        """The hunk at a placement inside its owner's grant."""
        return self.placed.get(id(hunk), hunk)


def range_relation(g: RangeGrant, h: Hunk) -> str:
    """'in' when the hunk belongs to the range, 'touch' when it overlaps partly, else 'out'."""
    if h.old_lines == 0:
        return "in" if g.start - 1 <= h.old_start <= g.end else "out"
    lo, hi = h.old_start, h.old_start + h.old_lines - 1
    if g.start <= lo and hi <= g.end:
        return "in"
    if hi < g.start or lo > g.end:
        return "out"
    return "touch"


def merged_ranges(grants: Sequence[Grant]) -> list[RangeGrant]:
    """One task's range grants with touching or overlapping ranges of a file joined: its
    edit across the seam of two of its own ranges is inside its grant."""
    out: list[RangeGrant] = []
    for g in sorted((g for g in grants if isinstance(g, RangeGrant)), key=lambda g: (g.path, g.start)):
        last = out[-1] if out else None
        if last is not None and last.path == g.path and g.start <= last.end + 1:
            out[-1] = RangeGrant(kind="range", path=g.path, start=last.start,
                                 end=max(last.end, g.end))
        else:
            out.append(RangeGrant(kind="range", path=g.path, start=g.start, end=g.end))
    return out


def attribute(changes: Sequence[FileChange], tasks: Sequence[Task],
              old_texts: dict[str, bytes] | None = None,
              evidence: dict[str, Evidence] | None = None) -> Attribution:
    """Attribute every change of the tree to the grants of active `tasks`.

    `old_texts` holds the old (HEAD) bytes of changed files that carry range grants; with
    them a file held by ranges is divided region by region (shared/hunks/regions.py),
    never by the shape of git's hunks (SPEC.md, "Ownership rules"). `evidence` (path ->
    line digest -> the tasks whose sessions wrote / removed it: provenance) settles what
    the content alone cannot.
    """
    from hunkwise.shared.hunks.diff import split_lines
    from hunkwise.shared.hunks.slide import canonical, placements

    result = Attribution()
    active = [t for t in tasks if t.active]
    ranges: dict[str, list[tuple[str, RangeGrant]]] = {}
    points: dict[str, list[tuple[str, Grant]]] = {}
    globs: list[tuple[str, GlobGrant]] = []
    for t in active:
        for g in merged_ranges(t.grants):
            ranges.setdefault(g.path, []).append((t.id, g))
        for pg in t.grants:
            if pg.kind == "point":
                points.setdefault(pg.path, []).append((t.id, pg))
        globs += [(t.id, g) for g in t.grants if g.kind == "glob"]
    # A glob can only match paths under its literal prefix: the globs are found by the
    # prefixes of each changed path (one lookup per prefix length in use), so a changed
    # file never meets every task's grants and the cost stays flat in the tasks.
    by_prefix: dict[str, list[tuple[str, GlobGrant]]] = {}
    for tid, glob in globs:
        by_prefix.setdefault(_literal_prefix(glob.path), []).append((tid, glob))
    lengths = sorted({len(pre) for pre in by_prefix})
    for ch in changes:
        glob_owners = sorted({tid for n in lengths if n <= len(ch.path)
                              for tid, g in by_prefix.get(ch.path[:n], ())
                              if glob_matches(g.path, ch.path)})
        range_grants = ranges.get(ch.path, [])
        point_grants = points.get(ch.path, [])
        if not ch.splittable or not ch.hunks:
            owners = glob_owners
            lined = range_grants or point_grants
            if len(owners) == 1 and not lined:
                result.add(owners[0], ch, None)
            elif not owners and not lined:
                result.unowned.append((ch, None))
            else:
                holders = sorted(set(owners) | {tid for tid, _ in range_grants}
                                 | {tid for tid, _ in point_grants})
                if len(holders) == 1 and not owners:
                    # A range grant never owns a whole-file change (delete, mode, binary).
                    result.unowned.append((ch, None))
                else:
                    result.conflicts.append((ch, None, holders))
            continue
        if not range_grants and not (point_grants and ch.path in (old_texts or {})):
            for h in ch.hunks:
                if len(glob_owners) == 1:
                    result.add(glob_owners[0], ch, h)
                elif not glob_owners:
                    result.unowned.append((ch, h))
                else:
                    result.conflicts.append((ch, h, glob_owners))
            continue
        old = (old_texts or {}).get(ch.path)
        if old is not None and not glob_owners:
            _by_region(result, ch, split_lines(old), range_grants,
                       (evidence or {}).get(ch.path), point_grants)
            continue
        every = (placements(split_lines(old), ch.hunks) if old is not None
                 else [[h] for h in ch.hunks])
        lines = split_lines(old) if old is not None else []
        for h, places in zip(ch.hunks, every, strict=True):
            if len(places) > 1:
                result.canon[id(h)] = canonical(places)
            _judge(result, ch, h, places, set(glob_owners), range_grants, lines)
    return result


def _by_region(result: Attribution, ch: FileChange, old: list[bytes],
               range_grants: list[tuple[str, RangeGrant]], evidence: Evidence | None,
               point_grants: Sequence[tuple[str, Grant]] = ()) -> None:
    """Attribute a file held by line ranges region by region (shared/hunks/regions.py).

    git's hunks are replaced, in `ch` itself, by the division's: every hunk then lies in one
    region, so whoever reads the change (reports, accept, discard, restore) sees the same
    hunks the attribution judged.
    """
    from hunkwise.shared.hunks.diff import splice, split_lines
    from hunkwise.shared.hunks.regions import _order, divide, regions_of
    from hunkwise.shared.hunks.slide import canonical, placements

    new = split_lines(splice(b"".join(old), ch.hunks))
    regs = regions_of(len(old), [(g.start, g.end, tid) for tid, g in range_grants],
                      [(g.start, g.end, tid) for tid, g in point_grants])
    git_places = placements(old, ch.hunks)
    div = divide(old, new, ch.hunks, git_places, regs, evidence)
    ch.git_hunks = list(ch.hunks)
    # Placements depend on the hunks' values only, and below only their bytes are read:
    # a division that kept git's hunks has the placements already.
    same = div.hunks == ch.git_hunks
    ch.hunks[:] = div.hunks
    result.at_point |= div.at_point
    for h, places in zip(ch.hunks, git_places if same else placements(old, ch.hunks),
                         strict=True):
        if len(places) > 1:
            result.canon[id(h)] = canonical(places)
    for h, owner in sorted(div.owned, key=lambda ho: _order(ho[0])):
        if owner is None:
            result.unowned.append((ch, h))
        else:
            result.add(owner, ch, h)
            result.placed[id(h)] = h
    for c in div.contests:
        canon = c.canon or result.canon.get(id(c.hunk)) or c.hunk.sha256
        result.canon[id(c.hunk)] = canon
        result.ambiguous.append(Ambiguous(ch, c.hunk, canon, list(c.tasks),
                                          {t: c.hunk for t in c.tasks}, c.reason))
    for h, tids in div.conflicts:
        result.conflicts.append((ch, h, tids))


def _judge(result: Attribution, ch: FileChange, h: Hunk, places: list[Hunk],
           glob_owners: set[str], range_grants: list[tuple[str, RangeGrant]],
           old: list[bytes]) -> None:
    """One hunk: owned, ambiguous, a conflict, or unowned, judged on all its placements.

    A task owns it when some placement lies inside its grant and no placement lies only
    inside other tasks' grants; placements inside two tasks' grants exclusively make it
    ambiguous; a hunk that fits inside no grant at any placement but overlaps one is a
    conflict; the rest is unowned.

    An insertion exactly between two ranges lies inside both. Where the lines on either
    side of that point are equal (a run of identical lines split by the boundary), the
    edit may have come from either side, and no preference is taken: ambiguous.
    """
    inside: list[set[str]] = []
    touching: set[str] = set()
    where: dict[str, Hunk] = {}
    split = False
    for p in places:
        ins = set(glob_owners)
        for tid, g in range_grants:
            rel = range_relation(g, p)
            if rel == "in":
                ins.add(tid)
            elif rel == "touch":
                touching.add(tid)
        for tid in ins:
            # Prefer git's own placement, else the first inside the task's grant.
            if tid not in where or p is h:
                where[tid] = p
        inside.append(ins)
        if (len(ins) > 1 and not p.old_lines and 0 < p.old_start < len(old)
                and old[p.old_start - 1] == old[p.old_start]):
            split = True
    candidates = set().union(*inside)
    owners = {t for t in candidates if all(not ins or t in ins for ins in inside)}
    if split and len(candidates) > 1:
        owners = candidates
    if len(owners) == 1:
        tid = next(iter(owners))
        result.add(tid, ch, h)
        result.placed[id(h)] = where[tid]
    elif candidates:
        tasks = sorted(owners or candidates)
        canon = result.canon.get(id(h)) or h.sha256
        result.ambiguous.append(Ambiguous(ch, h, canon, tasks, {t: where[t] for t in tasks}))
    elif touching:
        result.conflicts.append((ch, h, sorted(touching)))
    else:
        result.unowned.append((ch, h))


# ---- range re-mapping through commits ----------------------------------------------------

def map_point(n: int, hunks: Sequence[Hunk], *, joining: bool = False) -> int:
    """Map an insertion point (after old line `n`; 0 is the top) through -U0 hunks old ->
    new: the point moves with line `n`. Lines inserted right after line `n` (at the point
    itself) leave it where it is, before them, or, `joining`, after them (they join it:
    a point's last position); where line `n` itself is replaced or removed, the point
    goes after what took its place."""
    delta = 0
    for h in hunks:  # in old-line order, as diff prints them
        if h.old_lines == 0:
            if h.old_start < n or (joining and h.old_start == n):
                delta += h.new_lines
            continue
        lo, hi = h.old_start, h.old_start + h.old_lines - 1
        if hi < n:
            delta += h.new_lines - h.old_lines
        elif lo <= n:
            # -U0 numbers a pure deletion's new side after the line before it.
            return h.new_start + h.new_lines - 1 if h.new_lines else h.new_start
        else:
            break
    return max(n + delta, 0)


def map_point_span(start: int, end: int, hunks: Sequence[Hunk]) -> tuple[int, int]:
    """A point's positions `start`..`end` (after old line q, for each q) through -U0 hunks
    old -> new. The lines inserted at it (and committed) widen it: a holder's line can go
    anywhere among the lines the point's holders inserted there before."""
    s = map_point(start, hunks)
    return s, max(s, map_point(end, hunks, joining=True))


def map_grant(g: Grant, hunks: Sequence[Hunk],
              places: Sequence[Sequence[Hunk]] | None = None) -> None:
    """Re-map a line grant (a range or a point) through -U0 hunks old -> new, in place.

    `places`: each hunk's placements (slide.placements). A commit's insertion that can lie
    outside a range is taken there: git may print it inside another task's range, through
    a run of identical lines at the edge (a helper appended after one function, slid into
    the blank lines that open the next), and the range would grow by lines not its own."""
    if places is not None and g.kind == "range":
        hunks = [_outside(g.start, g.end, h, ps) for h, ps in zip(hunks, places, strict=True)]
    if g.kind == "point":
        g.start, g.end = map_point_span(g.start, g.end, hunks)
    elif g.kind == "range":
        g.start, g.end = map_range(g.start, g.end, hunks)


def _lies_outside(start: int, end: int, p: Hunk) -> bool:
    if not p.old_lines:
        return p.old_start <= start - 1 or p.old_start >= end
    return p.old_start + p.old_lines - 1 < start or p.old_start > end


def reaches_into(g: Grant, hunks: Sequence[Hunk]) -> bool:
    """Does a hunk as printed reach into the range g (so its placements matter)?"""
    return g.kind == "range" and any(not _lies_outside(g.start, g.end, h) for h in hunks)


def _outside(start: int, end: int, h: Hunk, places: Sequence[Hunk]) -> Hunk:
    """The placement of a hunk that lies before or after the range [start, end], where the
    hunk as printed reaches into it and another placement does not (an insertion, or a
    deletion of a line one of a run of equal lines: a blank line a neighbour dropped, git
    may print as the range's own first); else the hunk as printed."""
    if _lies_outside(start, end, h):
        return h
    return next((p for p in places if p.old_lines == h.old_lines and
                 _lies_outside(start, end, p)), h)

def map_range(start: int, end: int, hunks: Sequence[Hunk], owned: Sequence[bool] | None = None) -> tuple[int, int]:
    """Map the 1-based inclusive range [start, end] through -U0 hunks old -> new.

    `owned[i]` says that hunk i was the range holder's own change: an insertion right
    before the range then joins it instead of pushing it down, one right after it joins
    it instead of staying outside (another task's decorator on its own first line never
    becomes this range's last line). An empty range is kept as
    (s, s - 1): an insertion point after line s - 1.
    """
    delta_before = 0
    new_start: int | None = None
    new_end: int | None = None
    delta_inside = 0
    for i, h in enumerate(hunks):  # in old-line order, as diff prints them
        mine = bool(owned and owned[i])
        d = h.new_lines - h.old_lines
        if h.old_lines == 0:
            p = h.old_start
            if p < start - 1 or (p == start - 1 and not mine and start <= end):
                delta_before += d
            elif p < end or (p == end and (mine or start > end)):
                delta_inside += d
            # else: right after the range, and not its holder's: it stays outside
                if p == start - 1 and new_start is None:
                    new_start = h.new_start
        else:
            lo, hi = h.old_start, h.old_start + h.old_lines - 1
            if hi < start:
                delta_before += d
            elif lo > end:
                continue
            else:
                if lo < start:
                    new_start = h.new_start if h.new_lines else h.new_start + 1
                if hi > end:
                    new_end = h.new_start + h.new_lines - 1 if h.new_lines else h.new_start
                else:
                    delta_inside += d
    s = new_start if new_start is not None else start + delta_before
    e = new_end if new_end is not None else end + delta_before + delta_inside
    if e < s - 1:
        e = s - 1
    return max(s, 1), e
