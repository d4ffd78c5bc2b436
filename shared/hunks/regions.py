"""Attribution by region: who made which lines of a file, whatever git's hunks look like.

A file's HEAD lines are cut at every grant boundary into regions (each range, each gap
between ranges). Each region's old lines are aligned with a contiguous share of the new
file, and the division of the new lines among the regions is one of least total cost
(lines removed plus lines added, region by region): an unchanged line anchors only inside
its own region (SPEC.md, "Ownership rules").

The least total cost of a division equals the plain diff's (any common subsequence of the
old and new lines can be cut between regions), so git's -U0 hunks are one optimal
alignment. Where no hunk (at any of its placements) touches a boundary, git's hunks stay
as they are, each inside one region. Around the boundaries a hunk touches, a *window*
of whole regions, anchored on unchanged lines at its edges, is solved exactly: for every
boundary in it, the set of cut positions some least-cost division uses (two bit-parallel
LCS passes, forward and backward). A boundary with one such cut divides the new lines
there for sure; one with several leaves a *contested block*, the new lines between the
lowest and the highest cut, which two least-cost divisions credit to different regions.

A contested block is settled, in this order:
1. between a range and a gap, it is the range's (an insertion at a range's edge is in it);
2. by evidence (provenance): a division that credits a line to a task whose session did
   not write it (or removes one it did not remove), while another's session did, is out;
   so is one that keeps a line in a region whose task's session removed it while another
   task's session, not its own, wrote one like it;
3. where the remaining divisions differ only by lines inserted at the boundary (a pure
   insertion), by the equivalent-placements rule: the division that keeps the regions'
   edge lines in place (the insertion can lie strictly inside one region) wins; between two
   tasks' ranges a boundary counts once, when either side keeps its edge line, so a line
   changed at one range's edge stays there while an insertion strictly inside one range,
   which could as well lie at the other's edge, stays contested;
4. otherwise it stays *ambiguous*: an insertion hunk at the boundary that either task may
   claim in its report, named with both tasks, the lines and the real reason.

Each region's share is then diffed against its old lines, so every hunk lies inside one
region. An insertion at a region's own edge is written as a replacement of its edge line
(so the only insertion exactly at a boundary is a contested block, and splicing any
selection of hunks is unambiguous).
"""

from __future__ import annotations

import difflib
import functools
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from hunkwise.shared.hunks.diff import Hunk

# digest of a line (line ending stripped) -> ({task: how many such lines its sessions
# wrote}, {task: how many such lines its sessions removed})
Evidence = dict[str, tuple[dict[str, int], dict[str, int]]]


@dataclass(frozen=True)
class Region:
    start: int          # first old line, 1-based
    end: int            # last old line, inclusive (start - 1: no old line, a point)
    owner: str | None   # a task id, or None for a gap no range holds (or a point)
    # A shared insertion point: (first, last position, task) per holder, a position q
    # being "after old line q". Its old lines (start..end) are lines inserted there before
    # and committed; only whole new lines inserted among them are its holders'.
    holders: tuple[tuple[int, int, str], ...] = ()

    @property
    def point(self) -> bool:
        return bool(self.holders)

    @property
    def tasks(self) -> list[str]:
        return sorted({t for _a, _z, t in self.holders})


@dataclass
class Contest:
    """New lines two least-cost divisions credit to different tasks (or a line at a shared
    insertion point that nothing says whose it is)."""

    hunk: Hunk          # an insertion after the boundary's old line
    tasks: list[str]    # the tasks, in file order
    reason: str
    canon: str | None = None  # its identity, where its content alone is not one


@dataclass
class Division:
    owned: list[tuple[Hunk, str | None]] = field(default_factory=list)  # owner None: unowned
    contests: list[Contest] = field(default_factory=list)
    conflicts: list[tuple[Hunk, list[str]]] = field(default_factory=list)
    hunks: list[Hunk] = field(default_factory=list)  # every hunk, in file order
    at_point: set[int] = field(default_factory=set)  # id() of the hunks at shared points


def regions_of(n: int, ranges: Sequence[tuple[int, int, str]],
               points: Sequence[tuple[int, int, str]] = ()) -> list[Region]:
    """Cut old lines 1..n at every range boundary: the ranges, and gaps between them; and
    each gap at its shared insertion points (`points`: first and last position, task),
    which become regions of their own (of no old line, or of the lines committed there).
    Points that share a position are one region; a point strictly inside a range is the
    range's (no other task may hold it there)."""
    out: list[Region] = []
    at = 1
    for start, end, owner in sorted(ranges):
        start, end = max(start, 1), min(end, n)
        if end < start:
            continue
        if start > at:
            out.append(Region(at, start - 1, None))
        out.append(Region(start, end, owner))
        at = end + 1
    if at <= n:
        out.append(Region(at, n, None))
    if not points:
        return out
    spans: list[tuple[int, int, list[tuple[int, int, str]]]] = []  # first, last position, holders
    for a, z, tid in sorted((max(0, min(a, n)), max(0, min(z, n)), t) for a, z, t in points):
        z = max(a, z)
        if any(r.owner is not None and r.start <= a and z < r.end for r in out):
            continue  # strictly inside a range
        if spans and a <= spans[-1][1]:
            first, last, held = spans[-1]
            spans[-1] = (first, max(last, z), held + [(a, z, tid)])
        else:
            spans.append((a, z, [(a, z, tid)]))
    for a, z, held in spans:
        cut: list[Region] = []
        for r in out:
            # A gap around the point's lines a+1..z loses them; a range keeps its lines
            # (a point's span never reaches into a range but at its edge).
            if r.owner is None and not r.point and r.start <= z and a + 1 <= r.end:
                if r.start <= a:
                    cut.append(Region(r.start, a, None))
                if z + 1 <= r.end:
                    cut.append(Region(z + 1, r.end, None))
            else:
                cut.append(r)
        k = next((i for i, r in enumerate(cut) if r.start > a), len(cut))
        cut.insert(k, Region(a + 1, z, None, tuple(held)))
        out = cut
    return out


def _reach(old: Sequence[bytes], b: int) -> tuple[int, int]:
    """Old lines (1-based, inclusive) of the identical-line runs ending at line b and
    starting at line b + 1, and one line beyond each."""
    a = b
    while a > 1 and old[a - 2] == old[b - 1]:
        a -= 1
    z = b + 1
    while z < len(old) and old[z] == old[b]:
        z += 1
    return max(a - 1, 1), min(z + 1, len(old))


def _touched(h: Hunk, bounds: set[int]) -> set[int]:
    """Boundaries (old line b: between b and b + 1) a placement of a hunk touches."""
    if h.old_lines == 0:
        return {h.old_start} & bounds
    lo, hi = h.old_start - 1, h.old_start + h.old_lines - 1
    return {b for b in bounds if lo <= b <= hi}


def divide(old: Sequence[bytes], new: Sequence[bytes], hunks: Sequence[Hunk],
           places: Sequence[Sequence[Hunk]], regions: Sequence[Region],
           evidence: Evidence | None = None) -> Division:
    """Divide a file's change (git's -U0 `hunks` from `old` to `new` lines, each with its
    placements) among `regions`."""
    bounds = {r.end for r in regions[:-1]}
    # A point's positions are all boundaries of it: an insertion among the lines committed
    # at a point is solved as one at its edge is.
    inner = {q: {r.start - 1, r.end} & bounds for r in regions if r.point
             for q in range(r.start, r.end)}
    # A boundary needs the exact division when a hunk (at any placement) touches it, or
    # touches the runs of identical lines on either side of it and the line beyond each:
    # through such a run an equal-cost division can move lines across the boundary even
    # where git's hunk does not reach it.
    near = {b: _reach(old, b) for b in bounds}
    dirty: set[int] = set()
    for ps in places:
        for p in ps:
            dirty |= _touched(p, bounds)
            for q in _touched(p, set(inner)):
                dirty |= inner[q]
            lo, hi = (p.old_start, p.old_start) if not p.old_lines else (
                p.old_start, p.old_start + p.old_lines - 1)
            dirty |= {b for b, (a, z) in near.items() if lo <= z and hi >= a - (not p.old_lines)}
    if evidence:
        dirty |= _recorded_across(old, places, regions, bounds - dirty, evidence)
    out = Division()
    # Gaps between old lines (after old line q) that some placement of a hunk reaches: a
    # window's edge is never one of them, so git's alignment holds on both sides of it.
    touched: set[int] = set()
    for ps in places:
        for p in ps:
            if p.old_lines:
                touched.update(range(p.old_start - 1, p.old_start + p.old_lines))
            else:
                touched.add(p.old_start)
    n = len(old)
    spans: list[list[int]] = []  # windows: [first old line, last old line]
    by_end: dict[int, list[int]] = {}
    for k, r in enumerate(regions[:-1]):
        by_end.setdefault(r.end, []).append(k)
    for b in sorted(dirty):
        # The regions on both sides, as far as WINDOW lines from the boundary: a long
        # region is not solved whole for an edit at its edge. (At a point, two boundaries
        # share a position: each brings its own side.)
        for k in by_end[b]:
            x, y = regions[k], regions[k + 1]
            spans.append([max(1, x.start if x.start <= x.end else x.end, b - WINDOW + 1),
                          min(n, y.end if y.start <= y.end else y.start, b + WINDOW)])
    if len(regions) == 1 and regions[0].point:
        spans.append([1, n])  # a file held only at one point: no boundary, one window
    merged: list[list[int]] = []
    for a, z in sorted(spans):
        while a > 1 and a - 1 in touched:
            a -= 1
        while z < n and z in touched:
            z += 1
        if merged and a <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], z)
        else:
            merged.append([a, z])
    for lo, hi in merged:
        regs = [Region(max(r.start, lo), min(r.end, hi), r.owner, r.holders) for r in regions
                if (r.end >= lo and r.start <= hi) or (r.start > r.end and lo - 1 <= r.end <= hi)]
        nlo = lo + _delta_before(hunks, lo - 1)
        nhi = len(new) if hi == n else hi + _delta_before(hunks, hi)
        out.owned += _solve(old, new, regs, lo, nlo, nhi, n, evidence, out)
    for h in hunks:
        at = h.old_start if h.old_lines else h.old_start + 0.5
        if any(lo - 0.5 <= at <= hi + 0.5 for lo, hi in merged):
            continue
        k = _region_of(h, regions)
        out.owned.append((h, regions[k].owner))
    every = ([h for h, _ in out.owned] + [c.hunk for c in out.contests]
             + [h for h, _ in out.conflicts])
    every.sort(key=_order)
    out.hunks = every
    return out


def _recorded_across(old: Sequence[bytes], places: Sequence[Sequence[Hunk]],
                     regions: Sequence[Region], bounds: set[int], evidence: Evidence
                     ) -> set[int]:
    """Boundaries no hunk touches, where the unchanged lines between one and a hunk in the
    region beside it are lines the record says the task across the boundary wrote, or the
    region's own task removed: git kept them in place, but they may be the neighbour's,
    written where the region's task deleted its own (a function deleted beside a helper
    the neighbour put above its own, ending alike). Such a boundary is divided exactly."""
    changed: set[int] = set()
    at: set[int] = set()  # insertions after old line q
    for ps in places:
        for p in ps:
            if p.old_lines:
                changed.update(range(p.old_start, p.old_start + p.old_lines))
            else:
                at.add(p.old_start)
    owner_of = {r.end: (r.owner, regions[k + 1].owner)
                for k, r in enumerate(regions[:-1]) if r.end in bounds}
    out: set[int] = set()
    for b, (x, y) in owner_of.items():
        if x is None or y is None or x == y:
            continue
        for step, mine, theirs in ((-1, x, y), (1, y, x)):
            q = b if step < 0 else b + 1
            run: list[bytes] = []
            while 1 <= q <= len(old) and len(run) < WINDOW and q not in changed and \
                    not (step < 0 and q in at) and not (step > 0 and q - 1 in at and run):
                run.append(old[q - 1])
                q += step
            if not (1 <= q <= len(old)) or len(run) >= WINDOW or not run:
                continue  # (no hunk near: nothing moved there)
            for line in run:
                if not _strong(line):
                    continue
                writers, removers = evidence.get(_digest(line), _NONE)
                if (theirs in writers and mine not in writers) or mine in removers:
                    out.add(b)
                    break
    return out


def _order(h: Hunk) -> tuple[float, int]:
    """File order: a removal at its first old line, an insertion after old line p in the
    gap at p + 0.5; hunks meeting at one point by their new lines."""
    return (h.old_start if h.old_lines else h.old_start + 0.5, h.new_start)


def _delta_before(hunks: Sequence[Hunk], q: int) -> int:
    """new - old line count of git's hunks wholly before the gap after old line q."""
    d = 0
    for h in hunks:
        if (h.old_lines and h.old_start + h.old_lines - 1 <= q) or (not h.old_lines and h.old_start < q):
            d += h.new_lines - h.old_lines
    return d


def _region_of(h: Hunk, regions: Sequence[Region]) -> int:
    at = h.old_start if h.old_lines else max(h.old_start, 1)
    if not h.old_lines and h.old_start == 0:
        return 0
    for k, r in enumerate(regions):
        if r.start <= at <= r.end:
            return k
    return len(regions) - 1


# ---- one window ---------------------------------------------------------------------------

def _rows(ids: Sequence[int], cuts: Sequence[int], masks: dict[int, int], width: int) -> dict[int, list[int]]:
    """_row for every prefix ids[:cut], in one pass."""
    full = (1 << width) - 1
    v = full
    want = set(cuts)
    out: dict[int, list[int]] = {}
    for i in range(len(ids) + 1):
        if i in want:
            bits = bin(v)[2:].zfill(width)[::-1] if width else ""
            row = [0] * (width + 1)
            z = 0
            for c in range(width):
                if bits[c] == "0":
                    z += 1
                row[c + 1] = z
            out[i] = row
        if i < len(ids):
            u = v & masks.get(ids[i], 0)
            v = ((v + u) | (v - u)) & full
    return out


def _masks(seq: Sequence[int]) -> dict[int, int]:
    m: dict[int, int] = {}
    for j, x in enumerate(seq):
        m[x] = m.get(x, 0) | (1 << j)
    return m


def _solve(old: Sequence[bytes], new: Sequence[bytes], regs: Sequence[Region], lo: int,
           nlo: int, nhi: int, n_old: int, evidence: Evidence | None,
           out: Division) -> list[tuple[Hunk, str | None]]:
    """Divide new lines nlo..nhi (1-based, inclusive) among regions `regs` (old lines
    lo..regs[-1].end); contests and conflicts go to `out`, owned hunks are returned."""
    ow = list(old[lo - 1:regs[-1].end])
    nw = list(new[nlo - 1:nhi])
    width = len(nw)
    # The cost that decides is on the lines that hold a word: a blank line, a closing quote
    # or brace anchors nothing (a blank line of one function never anchors another's), so
    # those lines go wherever the rules after cost put them.
    table: dict[bytes, int] = {}
    o_nb = [table.setdefault(x, len(table)) for x in ow if _strong(x)]
    n_at = [j for j, x in enumerate(nw) if _strong(x)]
    n_nb = [table.setdefault(nw[j], len(table)) for j in n_at]
    m = len(n_nb)
    upto = [0]  # non-blank old lines before each old line
    for x in ow:
        upto.append(upto[-1] + _strong(x))
    before = [upto[r.end - lo + 1] for r in regs[:-1]]  # ... before each internal boundary
    fwd = _rows(o_nb, before + [len(o_nb)], _masks(n_nb), m)
    best = fwd[len(o_nb)][m]
    rev = _rows(o_nb[::-1], [len(o_nb) - b for b in before], _masks(n_nb[::-1]), m)
    cuts: list[list[int]] = []
    for b in before:
        pre, suf = fwd[b], rev[len(o_nb) - b]
        full: set[int] = set()
        for j in range(m + 1):
            if pre[j] + suf[m - j] == best:
                first = n_at[j - 1] + 1 if j > 0 else 0
                last = n_at[j] if j < m else width
                full.update(range(first, last + 1))
        cuts.append(sorted(full))
    settled = _settle_all(ow, nw, regs, lo, cuts, evidence)
    owned: list[tuple[Hunk, str | None]] = []
    # Overlapping contests (a region wholly contested on both sides): the window is one
    # conflict among its tasks, never committed.
    if settled is None:
        # Only the lines that differ: the common start and end of the window stay out.
        a, b, z = 0, 0, min(len(ow), len(nw))
        while a < z and ow[a] == nw[a]:
            a += 1
        while b < z - a and ow[len(ow) - 1 - b] == nw[len(nw) - 1 - b]:
            b += 1
        rem, add = ow[a:len(ow) - b], nw[a:len(nw) - b]
        h = Hunk(lo + a if rem else lo + a - 1, len(rem), nlo + a if add else nlo + a - 1,
                 len(add), b"".join(rem), b"".join(add))
        out.conflicts.append((h, sorted({t for r in regs for t in ([r.owner] if r.owner else r.tasks)})))
        return owned
    for k, r in enumerate(regs):
        s = settled[k - 1][1] if k > 0 else 0
        e = settled[k][0] if k < len(settled) else width
        if r.point:
            # Its lines: its own share, and the lines contested at its two boundaries.
            m_lo = settled[k - 1][0] if k > 0 else 0
            m_hi = settled[k][1] if k < len(settled) else width
            # (The line it follows, from the whole file: a window may start at the point.)
            follows = old[r.start - 2] if r.start >= 2 else b""
            got, contests, clashes = _point_hunks(ow, nw, regs, k, lo, nlo, (m_lo, s, e, m_hi),
                                                  evidence, follows)
            owned += got
            out.contests += contests
            out.conflicts += clashes
            out.at_point.update(id(h) for h, _ in got)
            out.at_point.update(id(c.hunk) for c in contests)
            continue
        owned += [(h, r.owner) for h in _region_hunks(ow, nw, r, lo, nlo, s, e, n_old)]
    for k, (c_lo, c_hi, contest) in enumerate(settled):
        if contest is None:  # (never at a point: its lines are settled one by one)
            continue
        b = regs[k].end
        block = nw[c_lo:c_hi]
        contest.hunk = Hunk(b, 0, nlo + c_lo, len(block), b"", b"".join(block))
        out.contests.append(contest)
    return owned


@functools.lru_cache(maxsize=1 << 16)
def holds_word(line: bytes) -> bool:
    """Does the line hold a word (and so can anchor its region)? A blank line, `}`, `)`
    or a closing quote does not."""
    return _WORD.search(line) is not None


_strong = holds_word


Score = tuple[int, int, int, int, int, int]
# How far into the regions beside a boundary its window reaches (then on to the nearest
# line pair no hunk touches).
WINDOW = 64

# A line that can anchor its region holds a word: `"""`, `}` or `)` anchor nothing.
_WORD = re.compile(rb"[A-Za-z0-9_]")


def _settle_all(ow: list[bytes], nw: list[bytes], regs: Sequence[Region], lo: int,
                cuts: list[list[int]], evidence: Evidence | None
                ) -> list[tuple[int, int, Contest | None]] | None:
    """Choose the cut at every boundary of a window together: (lowest cut, highest cut,
    contest or None) per boundary; None when no division can be told (a conflict).

    Each boundary offers the cuts some least-cost division uses; a division (one cut per
    boundary) is scored region by region, best first:
    1. least total cost (lines removed plus lines added; combinations of cuts that are
       each least-cost alone need not be together);
    2. consistent with the evidence: no task credited with a line another task's session
       wrote (or removed) and its own did not, no region keeping a line its task's session
       removed and another's wrote (`_kept_against`); then the most of what the sessions
       are on record as having written and removed accounted for;
    3. gaps no range holds left as they were (the change at a range's edge is the range's);
    4. more anchors kept in their own regions: lines that occur once in the window's old
       lines and once in its new ones (a blank line, `pass` or a closing quote anchor nothing);
    5. more of a region's lines edited in place (a line replaced by one that differs only
       in its middle, seven tenths of it kept);
    6. more regions keeping their edge lines where they were (an insertion that can lie
       strictly inside one region is that region's); between two tasks' ranges a
       boundary counts once, when either side keeps its edge (`meet`).
    Where divisions tie on all of it and credit lines differently, those lines are a
    contest between the two tasks (or, beside a gap, a conflict)."""
    width = len(nw)
    old_of = [ow[r.start - lo:r.end - lo + 1] for r in regs]
    once_old = Counter(_words(x) for x in ow if x.strip())
    once_new = Counter(_words(x) for x in nw if x.strip())
    unique = frozenset(w for w, n in once_old.items()
                       if n == 1 and once_new.get(w) == 1 and _WORD.search(w))
    layers = [[0]] + [_few(c) for c in cuts] + [[width]]
    seen = {t for w, g in (evidence or {}).values() for t in (*w, *g)}
    split = [bool(old_of[k] and old_of[k + 1] and _words(old_of[k][-1]) == _words(old_of[k + 1][0]))
             for k in range(len(regs) - 1)]
    table: dict[bytes, int] = {}
    beside = [not r.point and ((k > 0 and regs[k - 1].point)
                               or (k + 1 < len(regs) and regs[k + 1].point))
              for k, r in enumerate(regs)]
    # Boundaries between the ranges of two tasks (beside a point its own rules hold).
    rival = [regs[k].owner is not None and regs[k + 1].owner is not None
             and regs[k].owner != regs[k + 1].owner and not beside[k] and not beside[k + 1]
             for k in range(len(regs) - 1)]

    strong_new = [_strong(x) for x in nw]
    new_ids = [table.setdefault(x, len(table)) if f else -1 for x, f in zip(nw, strong_new, strict=True)]
    old_ids = [[table.setdefault(x, len(table)) for x in o if _strong(x)] for o in old_of]

    def cost_row(k: int, s: int) -> list[int]:
        """Region k's cost on non-blank lines against nw[s:e], for every e >= s."""
        sub = [i for i in new_ids[s:] if i >= 0]
        oid = old_ids[k]
        no = len(oid)
        row = _rows(oid, [no], _masks(sub), len(sub))[no]
        out, n = [no], 0
        for f in strong_new[s:]:
            n += f
            out.append(no + n - 2 * row[n])
        return out

    def meet(k: int, c: int) -> int:
        """Between two tasks' ranges, cut at c: 1 when either side keeps its edge line
        there. Not one for each side: an insertion that keeps both edges by lying strictly
        inside one range (a blank line appended to one function, or inserted into the
        blank run that opens the next; a helper appended after one function, or put above
        the next) could as well lie at the other's edge, and those lines stay a contest;
        a line replaced at one range's edge keeps the other's edge, and stays in place."""
        if c == kept_cut[k]:
            return 2
        left, right = old_of[k][-1:], old_of[k + 1][:1]
        return int(bool((c > 0 and left and _words(nw[c - 1]) == _words(left[0]))
                        or (c < width and right and _words(nw[c]) == _words(right[0]))))

    def kept_at(k: int) -> int | None:
        """Where the cut at rival boundary k stays when the weak lines around it (blank
        lines, closing brackets: lines that hold no word) are as they were: one run of them
        in the new lines, among the least-cost cuts, equal line for line to the old run the
        boundary cut, between the same worded lines (or those lines edited in place).
        Moving the cut inside such a run would have one range drop a blank line and the
        other add one, two edits where none was made: the cut stays where it was. A line
        inserted beside the run (a decorator, a helper, a line appended to a body) leaves
        it open: whose side it is on, the file cannot tell."""
        opts = cuts[k]
        if not opts or not (alive(k) and alive(k + 1)):
            return None  # (a range deleted but for a blank line keeps nothing in place)
        b = regs[k].end - lo + 1  # the old boundary, as an index into ow
        oa = b
        while oa > 0 and not _strong(ow[oa - 1]):
            oa -= 1
        oz = b
        while oz < len(ow) and not _strong(ow[oz]):
            oz += 1
        if oz == oa:
            return None  # no weak line at the boundary: nothing of the kind to keep
        def at(lines: Sequence[bytes], i: int) -> bytes | None:
            return _words(lines[i]) if 0 <= i < len(lines) else None

        def same(ni: int, oi: int, step: int) -> bool:
            """Is new line ni the old line oi, or that line edited in place (a new line
            where it stood, the line beyond it as it was)?"""
            x, y = at(nw, ni), at(ow, oi)
            return x == y or (x is not None and x not in old_words
                              and at(nw, ni + step) == at(ow, oi + step))

        found: list[int] = []
        a = min(opts)
        while a > 0 and not _strong(nw[a - 1]):
            a -= 1  # the start of the weak run the lowest cut is in
        while a <= max(opts):
            z = a
            while z < width and not _strong(nw[z]):
                z += 1
            cut = a + (b - oa)
            if nw[a:z] == ow[oa:oz] and cut in opts and same(a - 1, oa - 1, -1) and \
                    same(z, oz, 1):
                found.append(cut)
            a = z + 1
            while a < width and _strong(nw[a - 1]) and _strong(nw[a]):
                a += 1  # past the worded lines to the next run (or the next line)
        return found[0] if len(found) == 1 else None

    new_words = {_words(x) for x in nw}
    old_words = {_words(x) for x in ow}

    def alive(k: int) -> bool:
        """Does region k keep one of its distinctive lines somewhere in the new lines?"""
        return any(w in new_words for w in (_words(x) for x in old_of[k])
                   if once_old.get(w) == 1 and _WORD.search(w))

    kept_cut = [kept_at(k) if rival[k] else None for k in range(len(regs) - 1)]
    words_of = [[_words(x) for x in o] for o in old_of]
    old_counts = [Counter(o) for o in old_of]
    # How many more copies of each line the window's new lines hold than its old ones: a
    # write on record that these account for is not one written where a task removed its own.
    grown = Counter(nw)
    grown.subtract(ow)
    # Each task's old lines in the window, region by region: a removal on record that the
    # task's other regions here may account for is no sign against a line this one keeps.
    owned_old: dict[str, Counter[bytes]] = {}
    for reg, counted in zip(regs, old_counts, strict=True):
        if reg.owner is not None:
            owned_old.setdefault(reg.owner, Counter()).update(counted)
    own_words = [set(w) for w in words_of]
    nw_words = [_words(x) for x in nw]

    # What a share's score needs that the evidence does not change, once per share: the
    # solves with the record and without it (and each solve's second and third opinion)
    # score the same shares. (Kept for this window only: a long-lived process holds none.)
    deltas: dict[tuple[int, int, int], tuple[dict[bytes, int], dict[bytes, int]]] = {}
    measures: dict[tuple[int, int, int], tuple[int, int]] = {}

    def delta(k: int, s: int, e: int) -> tuple[dict[bytes, int], dict[bytes, int]]:
        got = deltas.get((k, s, e))
        if got is None:
            got = deltas[(k, s, e)] = _delta(old_of[k], nw[s:e])
        return got

    def score(k: int, s: int, e: int, row: list[int], ev: Evidence | None) -> Score | None:
        r, old, share = regs[k], old_of[k], nw[s:e]
        if r.point:
            # What is inserted at a point is its holders' (rule 3 does not hold it back);
            # never a line the record says another task wrote.
            told = 0
            if ev:
                held = set(r.tasks)
                for line, n_of in delta(k, s, e)[0].items():
                    writers = ev.get(_digest(line), _NONE)[0]
                    if writers and not held & set(writers):
                        return None
                    # (A blank line or a bracket on record says nothing of where: every
                    # holder's edit may have written one.) Each copy counts, as many as
                    # the holders wrote: a range beside the point, weighed line by line,
                    # must not gain by taking one of two copies from it.
                    if _strong(line):
                        told += min(n_of, sum(n for t, n in writers.items() if t in held))
                    # A line no holder is on record as writing, while they are on record in
                    # this file: not one of theirs (a blank line left where it was, say).
                    if not held & set(writers) and held & seen:
                        told -= n_of
            return (-row[e - s], told, 0, 0, 0, 0)
        if r.owner is None:
            # A gap beside a point keeps the most of its old lines, blank ones too: the
            # point's lines are inserted next to them. (A range is weighed by its own
            # rules: where they tie, the lines beside the point stay open, a margin.)
            kept = _kept(old, share) if beside[k] else 0
            # Lines some task's session is on record as writing are never credited to a
            # gap while a range could hold them (the gap would take a task's lines from it).
            stray = 0
            if ev:
                for line, n in delta(k, s, e)[0].items():
                    if _strong(line) and ev.get(_digest(line), _NONE)[0]:
                        stray += n
            return (-row[e - s], -stray, int(share == old) + kept, 0, 0, 0)
        told = 0
        if ev:
            added, removed = delta(k, s, e)
            if not _consistent(added, removed, r.owner, ev):
                return None
            if _kept_against(old_counts[k], removed, r.owner, ev, grown, owned_old[r.owner]):
                return None
            told = _accounted(added, removed, r.owner, ev, r.owner in seen, beside[k])
        # Edge lines count only for a region that keeps some non-blank line of its own: a
        # blank line left of a deleted function keeps nothing in place.
        edges = 0
        po, ps = words_of[k], nw_words[s:e]
        if not own_words[k].isdisjoint(filter(None, ps)):
            # Never across a boundary that splits a run of identical lines: there an edge
            # line kept could as well be the neighbour's. Between two tasks' ranges the
            # boundary counts once, below.
            if k > 0 and ps[:1] == po[:1] and not split[k - 1] and not rival[k - 1]:
                edges += 1
            if k < len(regs) - 1 and ps[-1:] == po[-1:] and not split[k] and not rival[k]:
                edges += 1
        if k < len(regs) - 1 and rival[k]:
            edges += meet(k, e)
        got = measures.get((k, s, e))
        if got is None:
            got = measures[(k, s, e)] = (_anchors(old, share, unique), _in_place(old, share))
        return (-row[e - s], told, 0, got[0], got[1], edges)

    # Each solve (with the evidence and without, the second opinion) scores the same
    # region shares again: each is computed once.
    rows: dict[tuple[int, int], list[int]] = {}
    scores: dict[tuple[int, int, int, bool], Score | None] = {}

    def row_of(k: int, s_cut: int) -> list[int]:
        row = rows.get((k, s_cut))
        if row is None:
            row = rows[(k, s_cut)] = cost_row(k, s_cut)
        return row

    def bounds() -> tuple[list[dict[int, int]], list[dict[int, int]], int] | None:
        """The least cost of the regions before each cut (`pre`) and after it (`post`),
        and the least cost of a whole division: cost decides first, so a share whose
        region cannot lie on a division of least cost is never scored."""
        pre: list[dict[int, int]] = [{0: 0}]
        for k in range(len(regs)):
            nxt: dict[int, int] = {}
            for s_cut, f in pre[k].items():
                row = row_of(k, s_cut)
                for e_cut in layers[k + 1]:
                    if e_cut >= s_cut:
                        v = f + row[e_cut - s_cut]
                        if v < nxt.get(e_cut, v + 1):
                            nxt[e_cut] = v
            pre.append(nxt)
        if width not in pre[-1]:
            return None
        post: list[dict[int, int]] = [{} for _ in pre]
        post[-1] = {width: 0}
        for k in range(len(regs) - 1, -1, -1):
            for s_cut in pre[k]:
                row = row_of(k, s_cut)
                got = [row[e_cut - s_cut] + v for e_cut, v in post[k + 1].items() if e_cut >= s_cut]
                if got:
                    post[k][s_cut] = min(got)
        return pre, post, pre[-1][width]

    # bounds() depends on the layers alone, not on the evidence or the order: once per layers.
    bounded: list[tuple[list[dict[int, int]], list[dict[int, int]], int] | None] = []

    def solve(ev: Evidence | None, order: tuple[int, ...] = (0, 1, 2, 3, 4, 5)
              ) -> list[dict[int, tuple[Score, list[int]]]] | None:
        """The best divisions by the rules in `order` (cost always first). Only shares on
        a division of least cost are scored; where the evidence rules out every one of
        those, every share is."""
        if not bounded:
            bounded.append(bounds())
        got = bounded[0]
        if got is not None:
            found = _walk(ev, order, got)
            if found is not None:
                return found
        return _walk(ev, order, None)

    def _walk(ev: Evidence | None, order: tuple[int, ...],
              bound: tuple[list[dict[int, int]], list[dict[int, int]], int] | None
              ) -> list[dict[int, tuple[Score, list[int]]]] | None:
        # best[k][c]: best score of regions 0..k-1 with boundary k-1 at cut c, and the
        # cuts before it that reach it (all of them, for ties).
        best: list[dict[int, tuple[Score, list[int]]]] = [{0: ((0, 0, 0, 0, 0, 0), [])}]
        as_given = order == (0, 1, 2, 3, 4, 5)
        told = ev is not None
        for k in range(len(regs)):
            nxt: dict[int, tuple[Score, list[int]]] = {}
            # The cuts that end region k, each with the least cost of the regions after it
            # (none, unbounded): a share off every division of least cost is never scored.
            ends: list[tuple[int, int | None]]
            if bound is None:
                ends = [(e_cut, None) for e_cut in layers[k + 1]]
                pre_k: dict[int, int] = {}
                least = 0
            else:
                post_k = bound[1][k + 1]
                ends = [(e_cut, post_k[e_cut]) for e_cut in layers[k + 1] if e_cut in post_k]
                pre_k, least = bound[0][k], bound[2]
            for s_cut, (sc, _) in best[k].items():
                row = row_of(k, s_cut)
                room = least - pre_k[s_cut] if bound is not None else 0
                for e_cut, after in ends:
                    if e_cut < s_cut or (after is not None and row[e_cut - s_cut] + after > room):
                        continue
                    key = (k, s_cut, e_cut, told)
                    if key in scores:
                        got = scores[key]
                    else:
                        got = scores[key] = score(k, s_cut, e_cut, row, ev)
                    if got is None:
                        continue
                    if not as_given:
                        got = (got[order[0]], got[order[1]], got[order[2]], got[order[3]],
                               got[order[4]], got[order[5]])
                    total = (sc[0] + got[0], sc[1] + got[1], sc[2] + got[2], sc[3] + got[3],
                             sc[4] + got[4], sc[5] + got[5])
                    held = nxt.get(e_cut)
                    if held is None or total > held[0]:
                        nxt[e_cut] = (total, [s_cut])
                    elif total == held[0]:
                        held[1].append(s_cut)
            if not nxt:
                return None
            best.append(nxt)
        return best

    best = solve(evidence) if evidence else None
    if best is None and evidence:
        # The evidence fits no least-cost division (a line one region happens to share
        # with another pulls the cut): it outweighs cost, so every cut is open to it.
        # (And a few below the least-cost cuts: a line the region above keeps may be one
        # the record says the region below wrote, its neighbour's decorator.)
        layers[1:-1] = [list(range(max(0, min(c) - 16), min(c)))
                        + _few(list(range(min(c), width + 1)), 64) for c in cuts]
        bounded.clear()
        best = solve(evidence)
        if best is None:
            return None
        used_evidence = True
    else:
        used_evidence = best is not None
    if best is None:
        best = solve(None)
    if best is None:
        return None
    # Every cut on some best division, boundary by boundary, walking back from the end.
    on: list[set[int]] = [set() for _ in layers]
    on[-1] = {width}
    for k in range(len(regs), 0, -1):
        for c in on[k]:
            on[k - 1].update(best[k][c][1])
    # A second opinion: the last two rules the other way round. Where it chooses other
    # cuts, the rules are not what decides, and those lines stay open.
    other = solve(evidence if used_evidence else None, (0, 1, 2, 3, 5, 4))
    if other is not None:
        path = _one_path(other, width, len(regs))
        for k in range(1, len(regs)):
            on[k].add(path[k])
    if any(r.point for r in regs):
        # A third, beside points: keeping a neighbour's old lines last. Where it cuts
        # elsewhere, lines beside the point could be the neighbour's kept ones or the
        # point's inserted ones (blank lines, copies): a margin, never committed.
        third = solve(evidence if used_evidence else None, (0, 1, 3, 4, 5, 2))
        if third is not None:
            path = _one_path(third, width, len(regs))
            for k in range(1, len(regs)):
                if regs[k - 1].point or regs[k].point:
                    on[k].add(path[k])
    if not used_evidence:
        # A region that keeps none of its own distinctive lines (each line it keeps could
        # as well be a neighbour's: a blank line, `pass`, a closing quote) is placed by
        # coincidence: the lines around it stay open, from its neighbours' other cuts to
        # its own far edge (a contest, or a conflict where the two meet).
        chosen = _one_path(best, width, len(regs))
        own = frozenset(w for w, n in once_old.items() if n == 1 and _WORD.search(w))
        for k, r in enumerate(regs):
            share = nw[chosen[k]:chosen[k + 1]]
            if r.owner is None or not any(x.strip() for x in share):
                continue  # (a point keeps nothing of its own: it holds no line to keep)
            if old_of[k] == share:
                continue
            kept = _anchors(old_of[k], share, own)
            if not kept:
                # (A gap beside it keeps its own lines: a gap owns nothing to contest.)
                if k > 0 and regs[k - 1].owner is not None:
                    on[k] |= set(range(min(layers[k]), chosen[k + 1] + 1))
                if k < len(regs) - 1 and regs[k + 1].owner is not None:
                    on[k + 1] |= set(range(chosen[k], max(layers[k + 1]) + 1))
                continue
            # A region that keeps fewer of its distinctive lines than it loses, its edge
            # line beside another task's range gone, is placed by coincidence on that side:
            # what it keeps there could as well be the neighbour's, written where the region
            # deleted its own (a decorator kept of a deleted function, beside a neighbour
            # that added the same; a function deleted but for its `return None`, beside a
            # neighbour that appended a helper ending so).
            top, bottom = _loose_sides(old_of[k], share, own, kept)
            if top and k > 0 and regs[k - 1].owner not in (None, r.owner):
                on[k] |= set(range(min(layers[k]), chosen[k + 1] + 1))
            if bottom and k < len(regs) - 1 and regs[k + 1].owner not in (None, r.owner):
                on[k + 1] |= set(range(chosen[k], max(layers[k + 1]) + 1))
    out: list[tuple[int, int, Contest | None]] = []
    for k in range(len(cuts)):
        got = sorted(on[k + 1])
        c_lo, c_hi = got[0], got[-1]
        if c_lo == c_hi:
            out.append((c_lo, c_lo, None))
            continue
        x, y = regs[k], regs[k + 1]
        if x.point or y.point:
            # The point's lines reach from its lowest cut to its highest: each is settled
            # line by line (_point_hunks).
            out.append((c_lo, c_hi, None))
            continue
        if x.owner is None or y.owner is None:
            return None
        xo, yo = old_of[k], old_of[k + 1]
        block = nw[c_lo:c_hi]
        if xo and yo and xo[-1:] == yo[:1]:
            reason = "a run of identical lines crosses the boundary of {x} and {y}"
        elif not (set(block) & set(xo + yo)):
            reason = "an insertion exactly at the boundary of {x} and {y}"
        else:
            reason = "lines that fit {x}'s old lines and {y}'s equally well"
        out.append((c_lo, c_hi, Contest(Hunk(0, 0, 0, 0, b"", b""), [x.owner, y.owner],
                                        reason.format(x=x.owner, y=y.owner))))
    if any(out[k][1] > out[k + 1][0] and not regs[k + 1].point for k in range(len(out) - 1)):
        return None
    return out


def _one_path(best: list[dict[int, tuple[Score, list[int]]]], width: int, n: int) -> list[int]:
    """One best division: the cut before each region (0 first, `width` last)."""
    path = [width]
    for k in range(n, 0, -1):
        path.append(best[k][path[-1]][1][0])
    return path[::-1]


def _few(options: list[int], most: int = 64) -> list[int]:
    """At most `most` of a boundary's cuts, its lowest and highest among them."""
    if len(options) <= most:
        return options
    step = (len(options) - 1) / (most - 1)
    return sorted({options[round(i * step)] for i in range(most)})


def _anchors(old: Sequence[bytes], share: Sequence[bytes], unique: frozenset[bytes]) -> int:
    """How many lines that occur once in the window's old lines and once in its new ones
    (by their words) a region's share keeps in order."""
    a = [w for w in (_words(x) for x in old) if w in unique]
    b = [w for w in (_words(x) for x in share) if w in unique]
    if not a or not b:
        return 0
    if a == b:
        return len(a)
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return sum(size for _i, _j, size in sm.get_matching_blocks())


def _loose_sides(old: Sequence[bytes], share: Sequence[bytes], own: frozenset[bytes],
                 kept: int) -> tuple[bool, bool]:
    """(top, bottom): the sides where a region that keeps fewer of its distinctive lines
    (`own`, by their words; `kept` of them, as `_anchors` counts) than it loses has lost
    its edge line (the first or last line that holds a word, neither kept nor edited in
    place)."""
    if 2 * kept >= sum(1 for x in old if _words(x) in own):
        return False, False
    ow = [_words(x) for x in old if _strong(x)]
    sw = [_words(x) for x in share if _strong(x)]
    return not _alike(ow[0], sw[0]), not _alike(ow[-1], sw[-1])


def _kept(old: Sequence[bytes], share: Sequence[bytes]) -> int:
    """How many of a region's old lines its share keeps, in order."""
    if not old or not share:
        return 0
    if old == share:
        return len(old)
    sm = difflib.SequenceMatcher(None, old, share, autojunk=False)
    return sum(size for _i, _j, size in sm.get_matching_blocks())


def _in_place(old: Sequence[bytes], share: Sequence[bytes]) -> int:
    """Lines of a region replaced, in order, by lines much like them (`_alike`)."""
    a = [_words(x) for x in old if _strong(x)]
    b = [_words(x) for x in share if _strong(x)]
    if a == b:
        return 0  # (nothing replaced)
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return sum(_alike_run(a[i1:i2], b[j1:j2])
               for tag, i1, i2, j1, j2 in sm.get_opcodes() if tag == "replace")


def _alike_run(a: list[bytes], b: list[bytes]) -> int:
    """The most lines of `a` that lines of `b` replace in order, each much like it (an
    LCS whose equality is `_alike`); small blocks only, larger ones count nothing."""
    if len(a) * len(b) > 4096:
        return 0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0] * (len(b) + 1)
        for j, y in enumerate(b):
            cur[j + 1] = prev[j] + 1 if _alike(x, y) else max(prev[j + 1], cur[j])
        prev = cur
    return prev[-1]


def _alike(x: bytes, y: bytes) -> bool:
    """Is `y` line `x` edited in place: the same but for a change in the middle that keeps
    seven tenths of the longer line?"""
    if x == y:
        return True
    n = min(len(x), len(y))
    p = 0
    while p < n and x[p] == y[p]:
        p += 1
    q = 0
    while q < n - p and x[-1 - q] == y[-1 - q]:
        q += 1
    return p + q >= 0.7 * max(len(x), len(y))


@functools.lru_cache(maxsize=1 << 16)
def _words(line: bytes) -> bytes:
    return b" ".join(line.split())


@functools.lru_cache(maxsize=1 << 16)
def _digest(line: bytes) -> str:
    from hunkwise.shared.state.provenance import line_digest

    return line_digest(line)


_NONE: tuple[dict[str, int], dict[str, int]] = ({}, {})


def _delta(old: Sequence[bytes], share: Sequence[bytes]
           ) -> tuple[dict[bytes, int], dict[bytes, int]]:
    """The lines a share adds to its region's old lines and the lines it removes, counted
    (as `Counter(share) - Counter(old)` and the reverse, in one pass)."""
    c = Counter(share)
    c.subtract(old)
    added = {line: n for line, n in c.items() if n > 0}
    removed = {line: -n for line, n in c.items() if n < 0}
    return added, removed


def _consistent(added: dict[bytes, int], removed: dict[bytes, int], task: str,
                evidence: Evidence) -> bool:
    """False when crediting a share (the lines it adds and removes, `_delta`) to `task`
    needs a line written (or removed) by another task's session and not by its own."""
    for line in added:
        writers, _ = evidence.get(_digest(line), _NONE)
        if writers and task not in writers:
            return False
    for line in removed:
        _, removers = evidence.get(_digest(line), _NONE)
        if removers and task not in removers:
            return False
    return True


def _kept_against(old: Counter[bytes], removed: dict[bytes, int], task: str,
                  evidence: Evidence, grown: Counter[bytes], mine: Counter[bytes]) -> bool:
    """Does a share keep a line of its region that the record says the task's sessions
    removed (more of them than the share removes) while other tasks' sessions, and not the
    task's own, wrote more like it than the window's new lines add (`grown`: new copies
    less old ones)? Then the line is not the region's old line kept: it is another task's,
    written where the task removed its own (a helper appended after a function whose
    neighbour deleted one ending alike; a decorator added to a function while the
    neighbour deleted its decorated one). A write the window's added copies account for
    (the neighbour's decorator beside the task's own, kept) leaves the kept line alone, and
    so does a removal the task's other regions in the window may account for (`mine`: the
    task's old lines here, this region's too). The record holds no places: a task that
    removed a copy beyond the window and kept this one, beside a neighbour that wrote one
    beyond it too, is taken for the exchange. Only lines that hold a word count: a blank
    line on record says nothing of where."""
    for line, n in old.items():
        if n <= removed.get(line, 0) or not _strong(line):
            continue  # (none of it kept)
        writers, removers = evidence.get(_digest(line), _NONE)
        if task in writers or removers.get(task, 0) <= removed.get(line, 0):
            continue
        if removers.get(task, 0) - removed.get(line, 0) <= mine.get(line, 0) - n:
            continue  # (the task's other regions here hold copies its removals may be of)
        others = sum(c for t, c in writers.items() if t != task)
        if others > max(0, grown.get(line, 0)):
            return True
    return False


def _accounted(added: dict[bytes, int], removed: dict[bytes, int], task: str,
               evidence: Evidence, recorded: bool, worded: bool = False) -> int:
    """The lines a share adds and removes (`_delta`) that the task's sessions are on record
    as having written and removed (counted: two blank lines written are two), less, for a
    task whose sessions are on record in this file at all, the lines it would add or
    remove that no record shows. `worded`: lines it adds count only when they hold a
    word (beside a point, whose lines weigh their record line by line, a blank line the
    task wrote there must not also pull a neighbour's blank line into its range)."""
    n = 0
    for line, k in added.items():
        if worded and not _strong(line):
            continue
        on = min(k, evidence.get(_digest(line), _NONE)[0].get(task, 0))
        n += on - (k - on if recorded else 0)
    for line, k in removed.items():
        on = min(k, evidence.get(_digest(line), _NONE)[1].get(task, 0))
        n += on - (k - on if recorded else 0)
    return n


def _region_hunks(ow: list[bytes], nw: list[bytes], r: Region, lo: int, nlo: int,
                  s: int, e: int, n_old: int) -> list[Hunk]:
    """-U0 hunks of region `r`'s old lines against its share nw[s:e], in file lines.

    An insertion at the region's own edge becomes a replacement of its edge line, so no
    hunk of a region is an insertion exactly at a boundary (the file's top and end are
    no boundary).
    """
    old = ow[r.start - lo:r.end - lo + 1]
    share = nw[s:e]
    sm = difflib.SequenceMatcher(None, old, share, autojunk=False)
    out: list[Hunk] = []
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            continue
        if tag == "insert" and i1 == 0 and r.start > 1:
            i2, j2 = 1, j2 + 1  # an equal run starting with the first line follows
        elif tag == "insert" and i1 == len(old) and r.end < n_old:
            i1, j1 = len(old) - 1, j1 - 1  # an equal run ending with the last line precedes
        out.append(_hunk(old, share, i1, i2, j1, j2, r.start, nlo + s))
    return out


def _hunk(old: list[bytes], share: list[bytes], i1: int, i2: int, j1: int, j2: int,
          o0: int, n0: int) -> Hunk:
    removed = b"".join(old[i1:i2])
    added = b"".join(share[j1:j2])
    os_ = o0 + i1 if i2 > i1 else o0 + i1 - 1
    ns = n0 + j1 if j2 > j1 else n0 + j1 - 1
    return Hunk(os_, i2 - i1, ns, j2 - j1, removed, added)


# ---- shared insertion points --------------------------------------------------------------

def _point_hunks(ow: list[bytes], nw: list[bytes], regs: Sequence[Region], k: int, lo: int,
                 nlo: int, cuts: tuple[int, int, int, int], evidence: Evidence | None,
                 follows: bytes) -> tuple[list[tuple[Hunk, str | None]], list[Contest], list[tuple[Hunk, list[str]]]]:
    """A point's lines, each settled on its own (SPEC.md: at a shared insertion point each
    holder owns the whole lines its report claims there).

    `cuts` are (lowest, own first, own last, highest) positions in `nw`: its share, and the
    lines contested at its boundaries (margins). A line in a margin could be the
    neighbour's own old line as well as one inserted at the point; a line whose place
    among the lines committed at the point is not sure (`_places_differ`,
    `_loose_segments`) could go on either side of one of them: such a line is a conflict
    (never committed) for the tasks that may hold it and the neighbour. Any other new line inserted at the point is:
    - a line that holds a word and occurs twice about the point: a conflict (which copy
      is whose, and where each goes, nothing tells);
    - the task's whose session the record says wrote it, among the tasks that may hold it
      there (holders whose span has its position, and a neighbour range's holder at the
      range's edge: an insertion at a range's edge is in the range);
    - else, where only one task may hold it, that task's, unless that task's sessions
      are on record in this file and not for this line;
    - else a contest among them, one line each, that reports settle by claiming it.
    The point's own old lines (inserted there before, and committed) are no holder's to
    change: a change of them is unowned."""
    r = regs[k]
    m_lo, s, e, m_hi = cuts
    s = min(max(s, m_lo), m_hi)
    e = min(max(e, s), m_hi)
    old = ow[r.start - lo:r.end - lo + 1]
    share = nw[s:e]
    items: list[tuple[int, int, bool]] = []  # (position, index in nw, in a margin)
    owned: list[tuple[Hunk, str | None]] = []
    items += [(r.start - 1, j, True) for j in range(m_lo, s)]
    sm = difflib.SequenceMatcher(None, old, share, autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "insert":
            items += [(r.start - 1 + i1, s + j, False) for j in range(j1, j2)]
        elif tag != "equal":
            owned.append((_hunk(old, share, i1, i2, j1, j2, r.start, nlo + s), None))
    # Among the lines committed at the point, where an inserted line goes is sure only
    # when aligning from the end gives the same place (a blank line committed there
    # matches either of two new blank lines): elsewhere it is a margin.
    unsure = (_places_differ(old, share) | _loose_segments(old, share)) if old else set()
    items = [(q, j, margin or j - s in unsure) for q, j, margin in items]
    items += [(r.end, j, True) for j in range(e, m_hi)]
    left = regs[k - 1] if k > 0 else None
    right = regs[k + 1] if k + 1 < len(regs) else None

    def candidates(q: int) -> list[str]:
        got = {t for a, z, t in r.holders if a <= q <= z}
        if q == r.start - 1 and left is not None and left.owner is not None:
            got.add(left.owner)
        if q == r.end and right is not None and right.owner is not None:
            got.add(right.owner)
        return sorted(got)

    # A line that occurs twice among the point's lines (and the lines beside it) says
    # nothing of which copy is whose, nor where each goes: never committed, for anyone.
    near = Counter(nw[max(m_lo - 2, 0):m_hi + 2])
    budget: dict[str, Counter[str]] = {}
    on_record = {t for w, g in (evidence or {}).values() for t in (*w, *g)}
    # nw index -> owner, None, contenders, or ("twice", the tasks it blocks)
    decided: dict[int, str | None | list[str] | tuple[str, list[str]]] = {}
    # Lines that hold a word first: a blank line's record is spent last.
    for q, j, margin in sorted(items, key=lambda it: not _strong(nw[it[1]])):
        cands = candidates(q)
        d = _digest(nw[j])
        writers = (evidence or {}).get(d, _NONE)[0]
        left_of = budget.setdefault(d, Counter(writers))
        w = [t for t in cands if left_of[t] > 0]
        side = left if j < s else right if j >= e else None  # (None: unsure, not a margin)
        if margin and not (side is not None and side.owner is not None and cands == [side.owner]):
            # It may be the neighbour's own old line (the neighbour's share stops before
            # it): no answer commits it right for either side. (Where the neighbour is a
            # range of the one task that may hold the line, its own `PATH::NAME+`, the line
            # is that task's whichever side it is on.)
            decided[j] = ("margin", cands + [x.owner for x in (left, right)
                                             if x is not None and x.owner and x.owner not in cands])
        elif near[nw[j]] > 1 and _strong(nw[j]):
            decided[j] = ("twice", [t for t in cands if writers.get(t)] or cands)
        elif len(w) == 1:
            left_of[w[0]] -= 1
            decided[j] = w[0]
        elif len(w) > 1:
            decided[j] = w
        elif writers and sum(left_of.values()) > 0:
            decided[j] = None  # another task's session wrote it, not a holder's
        elif len(cands) == 1 and not margin and cands[0] not in on_record:
            decided[j] = cands[0]
        else:
            decided[j] = cands
    seen: Counter[bytes] = Counter()
    ordinal: dict[int, int] = {}
    for j in range(m_lo, m_hi):
        seen[nw[j]] += 1
        ordinal[j] = seen[nw[j]]
    contests: list[Contest] = []
    conflicts: list[tuple[Hunk, list[str]]] = []
    run: list[tuple[int, int]] = []  # (position, index) of one owner's consecutive lines

    def flush() -> None:
        if run:
            q, j0 = run[0]
            who = decided[j0]
            block = b"".join(nw[j] for _q, j in run)
            owned.append((Hunk(q, 0, nlo + j0, len(run), b"", block), who if isinstance(who, str) else None))
            run.clear()

    for q, j, _margin in sorted(items, key=lambda it: it[1]):
        who = decided[j]
        if isinstance(who, tuple):
            flush()
            conflicts.append((Hunk(q, 0, nlo + j, 1, b"", nw[j]), who[1] or r.tasks))
            continue
        if isinstance(who, list):
            flush()
            line = nw[j]
            tasks = who or r.tasks
            where = f"the shared point after line {q}" + (
                f" (at the edge of {', '.join(t for t in tasks if t not in r.tasks)}'s range)"
                if any(t not in r.tasks for t in tasks) else "")
            contests.append(Contest(
                Hunk(q, 0, nlo + j, 1, b"", line), tasks,
                f"a line inserted at {where}, which {' and '.join(tasks)} may hold, and "
                "nothing recorded whose it is",
                _point_canon(follows, line, ordinal[j])))
            continue
        if run and (run[-1][0] != q or decided[run[-1][1]] != who or run[-1][1] != j - 1):
            flush()
        run.append((q, j))
    flush()
    return owned, contests, conflicts


def _places_differ(old: list[bytes], share: list[bytes]) -> set[int]:
    """Indexes of `share` whose insertion place among `old` differs between aligning from
    the start and from the end."""
    def places(a: list[bytes], b: list[bytes]) -> dict[int, int]:
        got: dict[int, int] = {}
        for tag, i1, _i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
            if tag == "insert":
                got.update({j: i1 for j in range(j1, j2)})
        return got

    forward = places(old, share)
    back = {len(share) - 1 - j: len(old) - i
            for j, i in places(old[::-1], share[::-1]).items()}
    return {j for j in set(forward) | set(back) if forward.get(j) != back.get(j)}


def _loose_segments(old: list[bytes], share: list[bytes]) -> set[int]:
    """Indexes of `share` in a stretch between two lines that hold a word (kept from `old`)
    where `old` has lines that `share` also has, and `share` more lines besides: which of
    the equal lines (a blank line) is the old one, and so on which side of it the new lines
    go, nothing tells."""
    so = [i for i, x in enumerate(old) if _strong(x)]
    sn = [j for j, x in enumerate(share) if _strong(x)]
    sm = difflib.SequenceMatcher(None, [old[i] for i in so], [share[j] for j in sn],
                                 autojunk=False)
    anchors = [(so[a + d], sn[b + d]) for a, b, size in sm.get_matching_blocks()
               for d in range(size)]
    out: set[int] = set()
    for (i0, j0), (i1, j1) in zip([(-1, -1), *anchors], [*anchors, (len(old), len(share))],
                                  strict=True):
        o, n = old[i0 + 1:i1], share[j0 + 1:j1]
        if o and len(n) > len(o) and set(o) & set(n):
            out.update(range(j0 + 1, j1))
    return out


def _point_canon(follows: bytes, line: bytes, ordinal: int) -> str:
    """A contested point line's identity: its bytes, the line the point follows, and which
    of the point's equal lines it is (two holders may insert the same blank line)."""
    import hashlib

    d = hashlib.sha256(b"point\0")
    for part in (follows, str(ordinal).encode(), line):
        d.update(len(part).to_bytes(8, "big"))
        d.update(part)
    return d.hexdigest()
