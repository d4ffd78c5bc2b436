"""Where a task's recorded changes stand in the tree now: kept, gone, or changed since.

Pure functions over -U0 hunks and texts (shared/work/recovery.py reads the git objects).
The task's changes are git's hunks of base -> own (a tree of the base and the task's
changes alone), the tree's git's hunks of base -> now, which hold every task's edits:
git prints two tasks' changes of neighbouring lines as one hunk, and may align one task's
blank line with a blank line another task removed. A change is *kept* when it is there as
printed, at another placement, as part of a wider hunk, or read line by line from the
lines around it; *gone* where it can stand with nothing else on its lines; *changed*
otherwise (restore refuses those).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from hunkwise.shared.hunks import diff
from hunkwise.shared.hunks.diff import Hunk
from hunkwise.shared.hunks.slide import canonical, placements

Pos = tuple[int, int, str]


def _span(s: int, n: int) -> tuple[int, int]:
    """A change's place in old-line coordinates doubled: a removal of lines [s, s+n-1]
    covers 2s..2(s+n-1); an insertion after line s is the point 2s+1 between two lines."""
    return (2 * s, 2 * (s + n - 1)) if n else (2 * s + 1, 2 * s + 1)


def _near(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Do two changes touch the same lines (as `diff.carry` sees a clash)? Then the region
    is not back to the commit's: someone, most likely the task itself, changed it further."""
    (a0, a1), (b0, b1) = _span(*a), _span(*b)
    return a0 <= b1 and b0 <= a1


def unmatched(recorded: Sequence[Pos], current: Sequence[Hunk]) -> list[int]:
    """Indexes of recorded changes with nothing of the current diff on their lines (or,
    for an insertion, only another insertion at its point: a line of another task there
    may stand beside it in a run of equal lines, as `classify` sees)."""
    free = Counter((h.old_start, h.old_lines, h.sha256) for h in current)
    left = []
    for i, r in enumerate(recorded):
        if free[r] > 0:
            free[r] -= 1
        elif not any(_near((r[0], r[1]), (h.old_start, h.old_lines))
                     and (r[1] or h.old_lines) for h in current):
            left.append(i)
    return left


def _old_span(h: Hunk) -> tuple[int, int]:
    """The old lines a hunk replaces, 0-based [a, b); a == b: an insertion before line a."""
    a = h.old_start - 1 if h.old_lines else h.old_start
    return a, a + h.old_lines


def _inside(r: Hunk, c: Hunk) -> bool:
    """Could `c` (base -> now) be `r` (base -> own) with changes of the lines beside it?
    git prints two changes of neighbouring lines (one task's blank line, the next task's
    first line) as one hunk. r's old lines lie within c's, and r's new lines stand in c's
    where r's place among c's old lines puts them: first, last, or (strictly inside) any."""
    (ra, rb), (ca, cb) = _old_span(r), _old_span(c)
    if not (ca <= ra and rb <= cb) or r == c:
        return r == c
    mine, theirs = diff.split_lines(r.added), diff.split_lines(c.added)
    first = theirs[:len(mine)] == mine
    last = theirs[len(theirs) - len(mine):] == mine if mine else True
    if ra == ca and rb == cb:
        return first or last
    if ra == ca:
        return first
    if rb == cb:
        return last
    return any(theirs[i:i + len(mine)] == mine for i in range(len(theirs) - len(mine) + 1))


def _image(i: int, current: Sequence[Hunk]) -> int | None:
    """Where base line i (0-based; -1 and len(base): the file's two ends) stands in the
    text `current` gives, or None when a current change removed it."""
    shift = 0
    for c in current:
        a, b = _old_span(c)
        if a <= i < b:
            return None
        if b <= i:
            shift += c.new_lines - c.old_lines
    return i + shift


def _agree(a: Sequence[bytes], b: Sequence[bytes]) -> tuple[int, bool]:
    """How many lines two texts agree on from their starts, and whether a line among
    them holds a word (blank lines, a closing quote, anchor nothing)."""
    n, worded = 0, False
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
        worded = worded or any(ch.isalnum() for ch in x.decode("utf-8", "replace"))
    return n, worded


def _longer(text: Sequence[bytes], mine: Sequence[bytes], base: Sequence[bytes]) -> bool:
    (n, worded), (m, _w) = _agree(text, mine), _agree(text, base)
    return worded and n > m


def _stands(r: Hunk, old: list[bytes], new: list[bytes], current: Sequence[Hunk]) -> bool:
    """Does the text hold r's lines where r put them, though git's diff of the base aligns
    them with another task's (a function it deleted, or rewrote): read from the line
    above r (and from the line below), does the text go on as the base with r does,
    further than as the base without r does?"""
    a, b = _old_span(r)
    added = diff.split_lines(r.added)
    above = _image(a - 1, current)
    if above is not None and _longer(new[above + 1:], [*added, *old[b:]], old[a:]):
        return True
    below = _image(b, current)
    return below is not None and _longer(new[:below][::-1], [*old[:a], *added][::-1],
                                         old[:b][::-1])


def classify(base_text: bytes, recorded: Sequence[Hunk], current: Sequence[Hunk],
             now_text: bytes | None = None) -> tuple[list[Hunk], list[Hunk]]:
    """Of `recorded` (one path's recorded changes), (gone, changed): not in `current` at
    any placement, with nothing else on their lines at one placement at least (which is
    the one returned) / with something else there at every placement.

    A line inside a run of identical lines may be printed elsewhere than when it was
    recorded and is still the same change; another task's identical line elsewhere is not.
    """
    old = diff.split_lines(base_text)
    now = diff.split_lines(now_text) if now_text is not None else None
    ordered = sorted(recorded, key=lambda h: (h.old_start, h.old_lines))
    rec_places = placements(old, ordered)
    cur_places = placements(old, list(current))
    cur = [(canonical(ps), {(p.old_start, p.old_lines) for p in ps}) for ps in cur_places]
    used: set[int] = set()
    gone, changed = [], []
    for h, ps in zip(ordered, rec_places, strict=True):
        ident, where = canonical(ps), {(p.old_start, p.old_lines) for p in ps}
        hit = next((j for j, (cid, cw) in enumerate(cur)
                    if j not in used and cid == ident and cw & where), None)
        if hit is not None:
            used.add(hit)
        elif any(_inside(p, c) for p in ps for c in current) or (
                now is not None and _stands(h, old, now, current)):
            continue  # in the tree still, as part of a hunk that also changes lines beside
        else:
            # Gone where it can stand with nothing else on its lines (a blank line in a run
            # of blank lines, beside another task's line inserted at one end of the run).
            # (A line of another task that can stand elsewhere in its own run does not
            # take a place: blocked is where every placement of a current change touches.)
            free = [p for p in ps if not any(
                all(_near((p.old_start, p.old_lines), (q.old_start, q.old_lines)) for q in qs)
                for qs in cur_places)]
            if free:
                gone.append(min(free, key=lambda p: abs(p.old_start - h.old_start)))
            else:
                changed.append(h)
    return gone, changed


def put_in(base: bytes, now: bytes, gone: Sequence[Hunk], current: Sequence[Hunk]
           ) -> tuple[bytes | None, list[Hunk]]:
    """`now` (`base` + `current`) with the `gone` hunks (over base) put back; or (None,
    the gone hunks that fall on lines `current` changes): nothing is put back then.
    A current change that can stand elsewhere in a run of identical lines (a blank line
    printed beside the place of a gone one) is taken where it leaves that place free.
    Raises ValueError where the lines around them moved in a way that cannot be followed."""
    if gone and current:
        old = diff.split_lines(base)
        placed = []
        for printed, places in zip(current, placements(old, list(current)), strict=True):
            clear = [q for q in places if not any(diff.touches(q, g) for g in gone)]
            placed.append(printed if printed in clear or not clear else clear[0])
        current = placed
    moved, clashes = diff.carry(gone, current)
    if clashes:
        return None, clashes
    return diff.splice(now, moved), []


MOST_READINGS = 8  # suspects beyond which `kept_in_every_reading` does not try every subset


def kept_in_every_reading(base: bytes, now: bytes, recorded: Mapping[str, Sequence[Hunk]],
                          suspects: Sequence[str]) -> set[str]:
    """Of `suspects` (tasks something of whose recorded changes to this file seems gone),
    those whose changes the file keeps however it is read.

    A reading is a set of suspects whose changes are gone: `now` must be `base` with the
    recorded changes of every other task spliced in (`recorded`: each task's hunks of
    base -> own, every task with a record of this file). A suspect is kept when at least
    one reading exists and none holds it. Where no reading gives `now` (a change no record
    holds, one task's change partly gone, two insertions at one point in another order),
    nothing is settled: the positional judgement stands, which errs toward "gone".
    """
    from itertools import combinations

    tried = sorted(t for t in set(suspects) if t in recorded)
    if not tried or len(tried) > MOST_READINGS:
        return set()
    offsets = diff.line_offsets(base)
    readings: list[set[str]] = []
    for k in range(len(tried) + 1):
        for gone in combinations(tried, k):
            kept = [h for t in sorted(recorded) if t not in gone for h in recorded[t]]
            try:
                text = diff.splice(base, kept, offsets)
            except ValueError:
                continue  # two tasks' changes on the same lines: not this reading
            if text == now:
                readings.append(set(gone))
    if not readings:
        return set()
    return {t for t in tried if not any(t in gone for gone in readings)}
