"""Every placement `shared/hunks/slide.py` finds yields the same file as git's own.

Random short texts over a small alphabet of lines (runs of identical lines everywhere),
random edits, real `git diff -U0` with the product's pinned options; each hunk moved to
each of its placements, with the other hunks where git put them, must splice the old text
into exactly the new one.
"""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

from hunkwise.shared import git
from hunkwise.shared.hunks.diff import parse_patch, splice, split_lines
from hunkwise.shared.hunks.slide import canonical, placements

ALPHABET = [b"\n", b"x\n", b"y\n", b"}\n", b"    pass\n"]


def _hunks(where: Path, old: bytes, new: bytes) -> list:
    (where / "a").write_bytes(old)
    (where / "b").write_bytes(new)
    out = subprocess.run(["git", "diff", "--no-index", "-U0", *git.DIFF_PINS, "a", "b"],
                         cwd=where, capture_output=True).stdout
    return next(iter(parse_patch(out).values()), (False, []))[1]


def test_every_placement_splices_to_the_same_file(tmp_path: Path) -> None:
    rng = random.Random(20261130)
    slid = 0
    for _ in range(250):
        old = [rng.choice(ALPHABET) for _ in range(rng.randint(0, 12))]
        new = list(old)
        for _ in range(rng.randint(1, 3)):
            op = rng.random()
            if op < 0.4 and new:
                del new[rng.randrange(len(new))]
            elif op < 0.8:
                new.insert(rng.randint(0, len(new)), rng.choice(ALPHABET))
            elif new:
                new[rng.randrange(len(new))] = rng.choice(ALPHABET)
        ob, nb = b"".join(old), b"".join(new)
        if rng.random() < 0.3 and nb:
            nb = nb[:-1]  # no newline at the end of the new text
        hunks = _hunks(tmp_path, ob, nb)
        every = placements(split_lines(ob), hunks)
        for i, places in enumerate(every):
            assert any(p is hunks[i] for p in places)  # git's own is one of them
            assert len({canonical(places)}) == 1
            slid += len(places) > 1
            for alt in places:
                moved = [*hunks[:i], alt, *hunks[i + 1:]]
                assert splice(ob, moved) == nb, (old, new, hunks[i], alt)
    assert slid > 20  # the texts do exercise sliding


def test_an_insertion_in_a_blank_run_slides_over_the_whole_run() -> None:
    from hunkwise.shared.hunks.diff import Hunk

    old = split_lines(b"def f():\n    pass\n\n\ndef g():\n")
    h = Hunk(2, 0, 3, 1, b"", b"\n")  # a blank line inserted after line 2
    starts = [p.old_start for p in placements(old, [h])[0]]
    assert starts == [2, 3, 4]
