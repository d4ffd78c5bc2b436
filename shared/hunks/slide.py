"""Every equivalent placement of a -U0 hunk (xdiff's slider logic, made exhaustive).

Inside a run of identical lines (blank lines, `}`, `pass`) a change can be printed at
several positions that all yield the same file: git's indent heuristic picks one. Which
one it picks must not decide which task a change belongs to (SPEC.md, "Ownership
rules"), so attribution looks at all of them.

A hunk replaces old lines [a, b) (0-based; a == b for a pure insertion before old line a)
with the lines A. It slides down by one when the line it leaves behind at the top equals
the line it takes in at the bottom: ([*A, old[b]])[0] == old[a], giving old lines
[a+1, b+1) and A' = [*A, old[b]][1:]. It slides up symmetrically. A hunk never slides
over a line that another hunk changes: the unchanged lines between two hunks bound it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from hunkwise.shared.hunks.diff import Hunk, split_lines


def _make(h: Hunk, a: int, b: int, added: list[bytes], old: Sequence[bytes], shift: int) -> Hunk:
    removed = b"".join(old[a:b])
    start = a + 1 if b > a else a
    return Hunk(start, b - a, h.new_start + shift, h.new_lines, removed, b"".join(added))


def _span(h: Hunk) -> tuple[int, int]:
    a = h.old_start - 1 if h.old_lines else h.old_start
    return a, a + h.old_lines


def placements(old: Sequence[bytes], hunks: Sequence[Hunk]) -> list[list[Hunk]]:
    """For each hunk (in old-line order, as git prints them), all its placements, top first.

    The hunk as printed is always one of them. `old` is the old text split into lines with
    their terminators (`diff.split_lines`).
    """
    out: list[list[Hunk]] = []
    spans = [_span(h) for h in hunks]
    for i, h in enumerate(hunks):
        lo = spans[i - 1][1] if i > 0 else 0
        hi = spans[i + 1][0] if i + 1 < len(hunks) else len(old)
        a, b = spans[i]
        added = split_lines(h.added)
        ups: list[Hunk] = []
        ca, cb, cadd, shift = a, b, added, 0
        while ca > lo:
            seq = [old[ca - 1], *cadd]
            if seq[-1] != old[cb - 1]:
                break
            cadd, ca, cb, shift = seq[:-1], ca - 1, cb - 1, shift - 1
            if not _terminated(cadd):
                break
            ups.append(_make(h, ca, cb, cadd, old, shift))
        downs: list[Hunk] = []
        ca, cb, cadd, shift = a, b, added, 0
        while cb < hi:
            seq = [*cadd, old[cb]]
            if seq[0] != old[ca]:
                break
            cadd, ca, cb, shift = seq[1:], ca + 1, cb + 1, shift + 1
            if not _terminated(cadd):
                break
            downs.append(_make(h, ca, cb, cadd, old, shift))
        out.append([*reversed(ups), h, *downs])
    return out


def _terminated(added: list[bytes]) -> bool:
    """Only the file's last line may lack a newline; a slide must not move it inward."""
    return all(line.endswith(b"\n") for line in added[:-1])


def canonical(h_places: Sequence[Hunk]) -> str:
    """A change's identity whatever placement git prints: its topmost placement's bytes."""
    top = h_places[0]
    d = hashlib.sha256()
    d.update(len(top.removed).to_bytes(8, "big"))
    d.update(top.removed)
    d.update(top.added)
    return d.hexdigest()
