"""shared/work/matching.py: where a task's recorded changes stand in the tree now."""

from __future__ import annotations

from hunkwise.shared.hunks.diff import Hunk
from hunkwise.shared.work.matching import MOST_READINGS, kept_in_every_reading

BASE = b"a\nb\nL\nc\n"
T = [Hunk(2, 0, 3, 1, b"", b"L\n")]  # t inserts L after line 2
V = [Hunk(3, 1, 3, 0, b"L\n", b"")]  # v deletes line 3, an equal L


def test_changes_that_cancel_out_settle_nothing_when_every_suspect_is_read() -> None:
    # The tree is the base again: both changes are there, or neither. Read with both
    # tasks as suspects, nothing is settled (each is gone in some reading).
    assert kept_in_every_reading(BASE, BASE, {"t": T, "v": V}, ["t", "v"]) == set()


def test_a_suspect_left_out_is_taken_for_present() -> None:
    # Why its callers hand it every task that seems to have lost something (recovery.
    # settle_jointly's contract, read_jointly for a worker command): asked about t alone,
    # v counts as present and t comes out kept.
    assert kept_in_every_reading(BASE, BASE, {"t": T, "v": V}, ["t"]) == {"t"}


def test_a_change_kept_in_the_only_reading_is_kept() -> None:
    now = b"a\nb\nL\nL\nc\n"  # t's L is there, v's deletion is not
    assert kept_in_every_reading(BASE, now, {"t": T, "v": V}, ["t", "v"]) == {"t"}


def test_no_reading_no_settlement() -> None:
    # A change no record holds (line c rewritten): no reading gives the tree.
    now = b"a\nb\nL\nL\nC\n"
    assert kept_in_every_reading(BASE, now, {"t": T, "v": V}, ["t"]) == set()


def test_records_on_the_same_lines_are_no_reading_and_too_many_suspects_are_not_tried() -> None:
    w = [Hunk(3, 1, 3, 1, b"L\n", b"M\n")]  # on v's line: together they cannot splice
    assert kept_in_every_reading(BASE, b"a\nb\nL\nc\n", {"v": V, "w": w}, ["v", "w"]) == set()
    many = {f"t{i}": T for i in range(MOST_READINGS + 1)}
    assert kept_in_every_reading(BASE, BASE, many, list(many)) == set()
