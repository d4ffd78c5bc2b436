"""Shared insertion points, proved by an oracle that knows who inserted each line.

A module with a list (`__all__`), functions held as line ranges, and shared points
(`PATH:+N`) held by one to three tasks each: inside the list, after a function's range (a
range's edge: the range's holder may insert there too), between two functions, at the
top and at the end of the file. Every holder inserts its lines at its point among the
lines the others inserted there (a block of its own, or spread out): names, blank lines,
a copy of the line the point follows, the same line another holder inserts. Range holders
edit their functions at the same time, on both sides of the points: a decorator on the
first line, a line appended at the end, a rewritten line, the whole function deleted.

Every task reports on the tree holding every edit, then the tasks are accepted in a
random order. After every accept HEAD must be exactly the base plus the accepted tasks'
lines: never a byte of another task, never a partial commit. A refusal is allowed only as
ambiguous (no record and no answer says whose a line is) or stale.

- Without provenance, each worker answers what `worker done` asks (`--claim` of its own
  lines, `--disclaim` of the others'), truthfully, line by line.
- With provenance (each task's written lines, as the agent hooks record them), nobody is
  asked anything where the record settles it.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

import pytest
from hunkwise.shared.hunks.ownership import Ambiguous
from hunkwise.shared.state.models import (
    Grant,
    PointGrant,
    RangeGrant,
)
from hunkwise.shared.state.provenance import line_digest

from testing.oracle import PATH, Differ, play


@dataclass
class Piece:
    kind: str                          # "gap", "range", "point"
    orig: list[str] = field(default_factory=list)
    final: list[str] = field(default_factory=list)
    owner: str | None = None           # a range's task
    holders: list[str] = field(default_factory=list)
    inserted: list[tuple[str, str]] = field(default_factory=list)  # a point's (task, line)


@dataclass
class Scenario:
    seed: int
    pieces: list[Piece]
    tasks: list[str]

    def lines(self, accepted: set[str]) -> list[tuple[str | None, str]]:
        """(who made it, line) of HEAD + the accepted tasks' edits; None: the base's."""
        out: list[tuple[str | None, str]] = []
        for p in self.pieces:
            if p.kind == "gap":
                out += [(None, x) for x in p.orig]
            elif p.kind == "range":
                # A range's lines are its holder's, kept ones too (as a worker reads its
                # own function), once it is accepted.
                src = p.final if p.owner in accepted else p.orig
                who = p.owner if p.owner in accepted else None
                out += [(who, x) for x in src]
            else:
                out += [(t, x) for t, x in p.inserted if t in accepted]
        return out

    def text(self, accepted: set[str]) -> bytes:
        return "".join(x for _w, x in self.lines(accepted)).encode()

    def grants(self) -> dict[str, list[Grant]]:
        out: dict[str, list[Grant]] = {t: [] for t in self.tasks}
        at = 0
        for p in self.pieces:
            if p.kind == "range" and p.owner:
                out[p.owner].append(RangeGrant(kind="range", path=PATH, start=at + 1,
                                               end=at + len(p.orig)))
            if p.kind == "point":
                for t in p.holders:
                    out[t].append(PointGrant(kind="point", path=PATH, start=at, end=at))
            at += len(p.orig)
        return out

    def describe(self) -> str:
        rows = [f"seed {self.seed}"]
        for p in self.pieces:
            if p.kind == "point":
                rows.append(f"  point {p.holders}: {p.inserted}")
            else:
                rows.append(f"  {p.kind} {p.owner}: {p.orig} -> {p.final}")
        return "\n".join(rows)


def build(seed: int, weak: bool = False) -> Scenario:
    """A scenario; with `weak`, holders also insert blank lines and copies of the line
    their point follows (lines that tell nothing of where they belong)."""
    rng = random.Random(seed)
    nf = rng.randint(2, 4)
    names = [f"f{k}" for k in range(nf)]
    pieces: list[Piece] = [Piece("gap", ['"""A module."""\n', "\n", "__all__ = [\n"]
                                 + [f'    "{n}",\n' for n in names[:-1]])]
    list_point = Piece("point")
    pieces += [list_point, Piece("gap", [f'    "{names[-1]}",\n', "]\n", "\n", "\n"])]
    ranged = [f"r{k}" for k in range(nf)]
    for k, n in enumerate(names):
        body = [f"def {n}(x):\n", f"    y = x + {k}\n", "    return y\n", "\n", "\n"]
        owner = ranged[k] if rng.random() < 0.85 else None
        pieces.append(Piece("range" if owner else "gap", body, owner=owner))
        if rng.random() < 0.5:
            pieces.append(Piece("point"))  # after a function: at a range's edge
        if k < nf - 1 and rng.random() < 0.3:
            pieces.append(Piece("gap", ["# a comment between\n", "\n"]))
    if rng.random() < 0.6:
        pieces.append(Piece("point"))  # the end of the file
    if rng.random() < 0.3:
        pieces.insert(0, Piece("point"))  # the top
    # Adjacent points are one point; a point between two ranges lies at both edges.
    merged: list[Piece] = []
    for p in pieces:
        if p.kind == "point" and merged and merged[-1].kind == "point":
            continue
        merged.append(p)
    pieces = merged
    points = [p for p in pieces if p.kind == "point"]
    holders = [f"p{k}" for k in range(4)]
    for p in points:
        p.holders = rng.sample(holders, rng.randint(1, 3))
        i = pieces.index(p)
        before = pieces[i - 1] if i > 0 else None
        if before is not None and before.kind == "range" and rng.random() < 0.4:
            p.holders.append(before.owner or "")  # the function's own point (PATH::NAME+)
        p.holders = sorted({h for h in p.holders if h})
    tasks = sorted({p.owner for p in pieces if p.kind == "range" and p.owner}
                   | {h for p in points for h in p.holders})
    sc = Scenario(seed, pieces, tasks)
    for p in pieces:
        if p.kind == "range":
            _edit_range(rng, p)
    for p in points:
        i = pieces.index(p)
        above = next((q for q in reversed(pieces[:i]) if q.orig), None)
        last = above.orig[-1] if above else "\n"
        for t in rng.sample(p.holders, len(p.holders)):
            _insert(rng, p, t, last, weak)
    return sc


def _edit_range(rng: random.Random, p: Piece) -> None:
    lines = list(p.orig)
    kind = rng.choice(["none", "decorate", "append", "change", "first", "delete", "blank"])
    if kind == "decorate":
        lines.insert(0, "@cache\n")
    elif kind == "append":
        lines[-1:-1] = ["def helper():\n", "    pass\n", "\n"]
    elif kind == "change":
        lines[1] = lines[1].replace("+", "-")
    elif kind == "first":
        lines[0] = lines[0].replace("(x)", "(x, z=None)")
    elif kind == "delete":
        lines = []
    elif kind == "blank":
        lines.append("\n")
    p.final = lines


def _insert(rng: random.Random, p: Piece, t: str, last: str, weak: bool) -> None:
    """A holder's lines at its point, among those the others inserted there."""
    mine: list[str] = []
    for k in range(rng.randint(1, 3)):
        r = rng.random()
        others = [x for w, x in p.inserted if w != t]
        if r < 0.55 or (not weak and r < 0.8):
            mine.append(f'    "{t}_{k}",\n')
        elif r < 0.7:
            mine.append("\n")
        elif r < 0.8:
            mine.append(last)  # a copy of the line the point follows
        elif r < 0.9 and others:
            mine.append(rng.choice(others))  # what another holder inserted too
        else:
            mine.append(f"{t}_{k} = {k}\n")
    if rng.random() < 0.6:
        at = rng.randint(0, len(p.inserted))
        p.inserted[at:at] = [(t, x) for x in mine]
    else:
        for x in mine:
            p.inserted.insert(rng.randint(0, len(p.inserted)), (t, x))


def _writes(sc: Scenario) -> dict[str, tuple[Counter[str], Counter[str]]]:
    """What each task's sessions wrote and removed, as the hooks record it."""
    wrote: dict[str, Counter[str]] = {}
    gone: dict[str, Counter[str]] = {}
    for p in sc.pieces:
        if p.kind == "range" and p.owner:
            wrote.setdefault(p.owner, Counter()).update(Counter(p.final) - Counter(p.orig))
            gone.setdefault(p.owner, Counter()).update(Counter(p.orig) - Counter(p.final))
        for t, x in p.inserted:
            wrote.setdefault(t, Counter())[x] += 1
    return {t: (wrote.get(t, Counter()), gone.get(t, Counter())) for t in set(wrote) | set(gone)}


def _evidence(sc: Scenario) -> dict[str, tuple[dict[str, int], dict[str, int]]]:
    out: dict[str, tuple[dict[str, int], dict[str, int]]] = {}
    for t, (wrote, gone) in _writes(sc).items():
        for side, lines in ((0, wrote), (1, gone)):
            for x, n in lines.items():
                out.setdefault(line_digest(x.encode()), ({}, {}))[side][t] = n
    return out


def run_scenario(seed: int, differ: Differ, provenance: bool,
                 weak: bool = False) -> tuple[int, list[str], int]:
    """(accepted, refused tasks, questions the workers were asked)."""
    sc = build(seed, weak)
    who = [w for w, _x in sc.lines(set(sc.tasks))]  # who made each line of the final tree

    def answer(tid: str, amb: Ambiguous) -> bool | None:
        lines = who[amb.hunk.new_start - 1:amb.hunk.new_start - 1 + amb.hunk.new_lines]
        if all(w == tid for w in lines):
            return True
        return False if all(w != tid for w in lines) else None

    return play(sc, sc.grants(), differ, _evidence(sc) if provenance else None, answer,
                seed * 7 + 3, f"seed {seed} (provenance {provenance})")


SEEDS = range(120)
CHUNKS = 3


@pytest.fixture(scope="module")
def differ(tmp_path_factory: pytest.TempPathFactory) -> Differ:
    return Differ(tmp_path_factory.mktemp("points"))


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(CHUNKS))
@pytest.mark.parametrize("provenance", [False, True], ids=["answers", "provenance"])
def test_no_accept_at_a_shared_point_commits_a_byte_of_another_task(
        chunk: int, provenance: bool, differ: Differ) -> None:
    """Exact commits, and most of them land: refusing everything would be exact too."""
    landed = refused = 0
    for got, no, _asked in differ.each(lambda seed: run_scenario(seed, differ, provenance),
                                       SEEDS[chunk::CHUNKS]):
        landed, refused = landed + got, refused + len(no)
    # Measured over all 120 seeds: 74% land with provenance, 25% without (a line at a
    # point beside a neighbour's blank lines is never committed on an answer alone).
    assert landed >= (0.65 if provenance else 0.15) * (landed + refused), (landed, refused)


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(CHUNKS))
@pytest.mark.parametrize("provenance", [False, True], ids=["answers", "provenance"])
def test_lines_that_tell_nothing_at_a_point_are_never_committed_wrong(
        chunk: int, provenance: bool, differ: Differ) -> None:
    """Holders also insert blank lines and copies of the line their point follows."""
    differ.each(lambda seed: run_scenario(seed, differ, provenance, weak=True),
                SEEDS[chunk::CHUNKS])


def test_with_provenance_the_holders_of_a_point_are_asked_little(differ: Differ) -> None:
    """The record settles who inserted which line: a tenth of the questions."""
    asked_with = sum(r[2] for r in differ.each(
        lambda seed: run_scenario(seed, differ, provenance=True), range(20)))
    asked_without = sum(r[2] for r in differ.each(
        lambda seed: run_scenario(seed, differ, provenance=False), range(20)))
    assert asked_without > 0 and asked_with * 10 <= asked_without, (asked_with, asked_without)


def test_a_discard_that_would_put_lines_back_between_two_equal_lines_is_refused(
        differ: Differ) -> None:
    """Seed 185 (holders copy each other's lines, with provenance): r1 deletes its whole
    function between two points whose lines hold two equal `"p0_0",` lines, one at each
    side of where f1 was. Discarding r1 put f1 back between the two: p2's line changed
    side. The discard now divides the tree as it would leave it and refuses, writing
    nothing, when any other task's changes would not stay the same."""
    run_scenario(185, differ, provenance=True, weak=True)


def test_a_range_beside_a_point_never_takes_one_of_two_copies_of_a_points_line(
        differ: Differ) -> None:
    """Seed 491 (with provenance, holders copying each other's lines): r2 holds a range
    and the point after it; p2 and r2 each wrote a `"p2_0",` there, p1 a blank line
    between them. The point weighed its lines' record once per distinct line, so r2's
    range gained by taking one copy (and p1's blank line with it) into its own insertion:
    discarding p1 left its blank line. Each copy now counts: the lines stay the point's,
    weighed line by line (a conflict where the copies cannot be told apart)."""
    run_scenario(491, differ, provenance=True, weak=True)


def test_reject_discard_refuses_to_move_a_neighbours_line_through_the_commands(
        make_repo, coord, worker) -> None:  # type: ignore[no-untyped-def]
    """Seed 168 played for real: `coord reject r0 --discard` exits 3 and writes nothing
    (it would put f0 back on the wrong side of a point's line); a plain reject still works."""
    from hunkwise.shared.state import provenance

    from testing.cli import ok

    sc = build(168, weak=True)
    base, final = sc.text(set()), sc.text(set(sc.tasks))
    repo = make_repo({PATH: base})
    session = {t: f"sess-20260101-0000-{t}@m" for t in sc.tasks}
    for tid, grants in sc.grants().items():
        ok(coord(repo, "assign", tid, "--title", tid, "--expect", "e",
                 *[x for g in grants for x in ("--write", str(g))]))
        ok(worker(repo, "start", tid, session=session[tid]))
    (repo / PATH).write_bytes(final)
    root = provenance.root_of(repo)
    for tid, (wrote, removed) in _writes(sc).items():
        provenance.note(root, session[tid], PATH, [x.encode() for x in wrote.elements()],
                        removed=[x.encode() for x in removed.elements()])
    for tid in sc.tasks:
        worker(repo, "done", tid, "--no-run-checks", session=session[tid])
    res = coord(repo, "reject", "r0", "--discard", "--note", "not this way")
    assert res.code == 3, res.stderr
    assert "would change with them" in res.stderr and "nothing was written" in res.stderr
    assert (repo / PATH).read_bytes() == final
    ok(coord(repo, "reject", "r0", "--note", "not this way"))
    assert (repo / PATH).read_bytes() == final
