"""Hunks carried across other edits land where applying both at once puts them.

`carry` moves hunks over an old text across edits of the same text (revert, restore);
`splice` applies hunks. For every set of hunks that touch no common line, applying some
first and carrying the rest must give the same bytes as applying all of them together.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest
from hunkwise.shared.hunks.diff import Hunk, carry, splice, touches


def _lines(n: int) -> list[bytes]:
    return [f"l{i}\n".encode() for i in range(1, n + 1)]


def _random_hunk(rng: random.Random, n: int, tag: int) -> Hunk:
    base = _lines(n)
    if rng.random() < 0.4:  # an insertion after old line p (0 = at the top)
        p, k = rng.randint(0, n), rng.randint(1, 3)
        return Hunk(p, 0, 0, k, b"", b"".join(f"i{tag}.{j}\n".encode() for j in range(k)))
    s = rng.randint(1, n)
    e = min(n, s + rng.randint(0, 2))
    k = rng.randint(0, 3)
    return Hunk(s, e - s + 1, 0, k, b"".join(base[s - 1:e]),
                b"".join(f"r{tag}.{j}\n".encode() for j in range(k)))


@pytest.mark.parametrize("seed", range(6))
def test_carry_then_splice_equals_splicing_everything(seed: int) -> None:
    rng = random.Random(seed)
    base = b"".join(_lines(10))
    checked = 0
    while checked < 1500:
        hunks = [_random_hunk(rng, 10, t) for t in range(rng.randint(2, 5))]
        if any(touches(a, b) for a, b in itertools.combinations(hunks, 2)):
            continue
        k = rng.randint(1, len(hunks) - 1)
        mine, theirs = hunks[:k], hunks[k:]
        moved, clashes = carry(mine, theirs)
        assert clashes == []
        assert splice(splice(base, theirs), moved) == splice(base, hunks), (mine, theirs)
        checked += 1


def test_an_insertion_after_a_replaced_line_follows_the_replacement() -> None:
    # The revert case: re-insert "line6" after old line 5, which a later commit replaced
    # with three lines; it belongs after all three.
    base = b"".join(_lines(6)).replace(b"l6\n", b"")
    later = Hunk(5, 1, 5, 3, b"l5\n", b"X\nY\nZ\n")
    reinsert = Hunk(5, 0, 6, 1, b"", b"l6\n")
    moved, clashes = carry([reinsert], [later])
    assert clashes == []
    assert splice(splice(base, [later]), moved) == b"l1\nl2\nl3\nl4\nX\nY\nZ\nl6\n"


def test_edits_of_the_same_lines_clash() -> None:
    a = Hunk(3, 2, 3, 1, b"l3\nl4\n", b"x\n")
    assert carry([a], [Hunk(4, 1, 4, 1, b"l4\n", b"y\n")]) == ([], [a])
    ins = Hunk(3, 0, 4, 1, b"", b"new\n")
    assert carry([ins], [Hunk(3, 0, 4, 1, b"", b"other\n")]) == ([], [ins])
    assert carry([ins], [Hunk(3, 2, 3, 0, b"l3\nl4\n", b"")])[1] == [ins]


def _texts(rng: random.Random) -> tuple[bytes, bytes]:
    """A text and an edit of it: lines replaced, removed, added, CRLF, no final newline."""
    old = [rng.choice([b"a", b"b", b"", b"c\r"]) + b"%d\n" % rng.randint(0, 3)
           for _ in range(rng.randint(0, 12))]
    new = list(old)
    for _ in range(rng.randint(1, 4)):
        at = rng.randint(0, len(new))
        kind = rng.random()
        if kind < 0.4 and at < len(new):
            del new[at:at + rng.randint(1, 3)]
        elif kind < 0.7 and at < len(new):
            new[at] = b"x%d\n" % rng.randint(0, 9)
        else:
            new[at:at] = [b"n%d\n" % rng.randint(0, 9)] * rng.randint(1, 2)
    oj, nj = b"".join(old), b"".join(new)
    if rng.random() < 0.3 and oj:
        oj = oj[:-1]
    if rng.random() < 0.3 and nj:
        nj = nj[:-1]
    return oj, nj


def test_splice_of_gits_own_hunks_gives_the_new_text(tmp_path: Path) -> None:
    # Git's -U0 hunks of old -> new, spliced onto old by line offsets (given or not),
    # give new back byte for byte, for texts with CRLF lines and without a final newline.
    from hunkwise.shared import git
    from hunkwise.shared.hunks.diff import blob_hunks, line_offsets, split_lines

    git.run(tmp_path, "init", "-q")
    rng = random.Random(7)
    pairs = [_texts(rng) for _ in range(120)]
    for i, (old, new) in enumerate(pairs):
        (tmp_path / "o").write_bytes(old)
        (tmp_path / "n").write_bytes(new)
        a = git.run(tmp_path, "hash-object", "-w", "--no-filters", "o").decode().strip()
        b = git.run(tmp_path, "hash-object", "-w", "--no-filters", "n").decode().strip()
        hunks = blob_hunks(tmp_path, a, b)
        offs = line_offsets(old)
        assert len(offs) == len(split_lines(old)) + 1 and offs[-1] == len(old)
        assert splice(old, hunks) == new, i
        assert splice(old, list(reversed(hunks)), offs) == new, i


def test_splice_refuses_a_hunk_its_base_does_not_hold_or_two_that_overlap() -> None:
    base = b"".join(_lines(5))
    with pytest.raises(ValueError, match="does not match"):
        splice(base, [Hunk(2, 1, 2, 1, b"nope\n", b"x\n")])
    with pytest.raises(ValueError, match="does not match"):
        splice(base, [Hunk(5, 2, 5, 0, b"l5\n", b"")])  # past the end
    with pytest.raises(ValueError, match="overlaps"):
        splice(base, [Hunk(2, 2, 2, 0, b"l2\nl3\n", b""), Hunk(3, 1, 3, 0, b"l3\n", b"")])


def test_diffs_of_two_trees_never_read_the_index(make_repo) -> None:
    """`git diff-tree` reads the whole index for attribute lookups (15-20 ms a call at
    100,000 files), which diffs of two trees do not need (hunkwise diffs attribute-binary
    files as text, `_undo_forced_binary`): it runs without one. Shown with an index git
    cannot read."""
    from hunkwise.shared.hunks.diff import diff_trees

    from testing.repo import git, write

    repo = make_repo({"a.txt": "one\ntwo\n", "b.dat": "x\n", ".gitattributes": "*.dat -diff\n"})
    write(repo, "a.txt", "one\nTWO\n")
    write(repo, "b.dat", "y\n")
    head = git(repo, "rev-parse", "HEAD^{tree}").strip()
    git(repo, "add", "-A")  # (the real index, put back at once: the test's own calls)
    tree = git(repo, "write-tree").strip()
    git(repo, "read-tree", "HEAD")
    index = repo / ".git" / "index"
    kept = index.read_bytes()
    index.write_bytes(b"DIRC garbage")  # a git command that reads it stops there
    try:
        changes = {c.path: c for c in diff_trees(repo, head, tree)}
    finally:
        index.write_bytes(kept)
    assert [h.added for h in changes["a.txt"].hunks] == [b"TWO\n"]
    assert [h.added for h in changes["b.dat"].hunks] == [b"y\n"]
