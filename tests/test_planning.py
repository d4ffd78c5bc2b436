"""The trial's plan, replayed in the coordinator's terms: four tasks each add a function
next to a given one, its name to `__all__`, to one import block and to the test module's,
and a line to an rst list, with symbol grants and shared insertion points, no line number
found by hand and no unowned "gap" line between slices of a list.

Workers edit in any order, each reading where its grants stand now from `worker start`
(never translating HEAD's line numbers); each accept, in random order, commits exactly its
task; the final files equal all four. Every line a task adds is unique, so the expected
HEAD after each accept is the final tree less the lines of the tasks not yet accepted.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from testing.cli import Cli, ok
from testing.repo import MakeRepo, git, write

# Each test replays four workers' whole task: a few seconds.
pytestmark = pytest.mark.slow

GIVEN = ["remove", "accumulate", "groupby", "interpose", "partition", "partition_all",
         "unique", "sliding_window"]
# Task -> (the function it adds, the given function it goes after). The given functions
# are never neighbours, so two tasks' functions never meet at one boundary.
NEW = {"A": ("remove_all", "remove"), "B": ("groupby_first", "groupby"),
       "C": ("partition_pad", "partition"), "D": ("sliding_pairs", "unique")}

ITERTOOLZ = ('"""Functions on iterables."""\n\nimport collections\n\n__all__ = (\n'
             + "".join(f'    "{g}",\n' for g in GIVEN) + ")\n\n\n"
             + "\n\n".join(f"# {g}: one of the given functions\n"
                           f"def {g}(seq, *args):\n    return list(seq)\n" for g in GIVEN))
CURRIED = ("import toolz\nfrom toolz import (\n" + "".join(f"    {g},\n" for g in GIVEN)
           + ")\n\npartition = toolz.curry(toolz.partition)\n")
TESTS = ("from toolz.itertoolz import (\n" + "".join(f"    {g},\n" for g in GIVEN)
         + ")\n\n\ndef test_remove():\n    assert remove([0, 1]) == [0, 1]\n")
API = ("Itertoolz\n---------\n\n.. autosummary::\n" + "".join(f"   {g}\n" for g in GIVEN)
       + "\nOther\n-----\n\nNothing here.\n")
FILES = {"toolz/itertoolz.py": ITERTOOLZ, "toolz/curried/__init__.py": CURRIED,
         "toolz/tests/test_itertoolz.py": TESTS, "doc/source/api.rst": API}

# Shared points: the line each list's new entries go after (found by content here, as the
# coordinator would read the file once; the grant itself is PATH:+N or a symbol's point).
LAST_CURRIED = CURRIED.split("\n").index("    sliding_window,") + 1
LAST_TESTS = TESTS.split("\n").index("    sliding_window,") + 1
LAST_API = API.split("\n").index("   sliding_window") + 1


# How the trial planned it before: every grant a HEAD line number found by reading the
# files, one line of each list per task with an unowned line between them (the gap
# trick), and every instruction in --expect.
OLD_EXPECT = (
    "Add {name} to toolz right after {after} in toolz/itertoolz.py (the function after it "
    "starts with a comment line; keep the two blank lines between functions). Add "
    '"{name}" to __all__ on its own line right after "{after}", keeping the tuple one name a '
    "line. Add {name} to the import block of toolz/curried/__init__.py right after {after}, "
    "and to the import block of toolz/tests/test_itertoolz.py right after {after}. Add "
    "{name} to doc/source/api.rst's autosummary list right after {after}, indented three "
    "spaces. The line numbers of your grants are HEAD's: other workers insert lines above "
    "yours, so find the places by their content, never by number. Keep every line under "
    "88 columns; do not reorder or reformat anything; do not touch the lines between your "
    "slices, which belong to nobody. Write a docstring-free one-line body. Commit message: "
    '"Add {name}" with a body naming the function it follows. Run the checks before done; '
    "if a check fails because of another worker's edit, say so in --unfinished rather than "
    "fixing it."
)
CHECKS = ["grep -q 'def {name}(seq):' toolz/itertoolz.py",
          "test \"$(grep -c '^def ' toolz/itertoolz.py)\" -ge 8",
          "grep -q \"from toolz import\" toolz/curried/__init__.py"]


def _line(text: str, line: str) -> int:
    return text.split("\n").index(line) + 1


def plan(task: str, *, mode: str) -> list[str]:
    """The task's grants. `points`: its given function's point and the shared points of
    the four lists; `ranges`: only its given function's symbol range; `old`: HEAD line
    numbers found by hand, one line of each list a task (the trial as it was)."""
    name, after = NEW[task]
    if mode in ("old", "old_brief"):
        s = _symbol_lines(after)
        quoted = '    "' + after + '",'
        return [f"toolz/itertoolz.py:{s[0]}-{s[1]}",
                f"toolz/itertoolz.py:{_line(ITERTOOLZ, quoted)}",
                f"toolz/curried/__init__.py:{_line(CURRIED, f'    {after},')}",
                f"toolz/tests/test_itertoolz.py:{_line(TESTS, f'    {after},')}",
                f"doc/source/api.rst:{_line(API, f'   {after}')}"]
    writes = [f"toolz/itertoolz.py::{after}" + ("+" if mode == "points" else "")]
    if mode == "points":
        writes += ["toolz/itertoolz.py::__all__+", f"toolz/curried/__init__.py:+{LAST_CURRIED}",
                   f"toolz/tests/test_itertoolz.py:+{LAST_TESTS}",
                   f"doc/source/api.rst:+{LAST_API}"]
    return writes


def _symbol_lines(name: str) -> tuple[int, int]:
    from hunkwise.shared.hunks.symbols import find

    span = find(ITERTOOLZ.encode(), "toolz/itertoolz.py", name)
    return span.start, span.end


def additions(task: str, *, mode: str) -> dict[str, list[str]]:
    """What the task inserts, per file (grant order): whole lines."""
    name, _after = NEW[task]
    out = {"toolz/itertoolz.py": [f"def {name}(seq):\n", f"    return list(seq)  # {name}\n",
                                  "\n", "\n"]}
    if mode != "ranges":
        out["toolz/itertoolz.py#all"] = [f'    "{name}",\n']
        out["toolz/curried/__init__.py"] = [f"    {name},\n"]
        out["toolz/tests/test_itertoolz.py"] = [f"    {name},\n"]
        out["doc/source/api.rst"] = [f"   {name}\n"]
    return out


@dataclass
class Trial:
    repo: Path
    coord: Cli
    worker: Cli
    rng: random.Random
    mode: str
    # How the workers say which lines at a shared point are theirs: "claim" (worker done
    # --claim, as a worker without the agent hooks does) or "record" (what the hooks'
    # provenance records of each tool call).
    say: str = "claim"
    sessions: dict[str, str] = field(default_factory=dict)
    added: dict[str, set[str]] = field(default_factory=dict)  # task -> lines it added
    owners: dict[str, list[str | None]] = field(default_factory=dict)  # path -> line's task

    def lines(self, path: str) -> list[str]:
        return (self.repo / path).read_text().splitlines(keepends=True)

    def start(self, task: str) -> dict[str, Any]:
        doc = ok(self.worker(self.repo, "start", task, session=self.sessions.get(task)))
        self.sessions[task] = doc["session"]
        return dict(doc)

    def edit(self, task: str, key: str) -> None:
        """One of the task's insertions, placed from where `worker start` says its grant
        stands in the tree now: right after a point, anywhere among the lines other tasks
        inserted there already (their order is the workers' business)."""
        places = self.start(task)["places"]
        path = key.split("#")[0]
        new = additions(task, mode=self.mode)[key]
        mine = [p for p in places if p["path"] == path]
        if self.mode in ("old", "old_brief"):  # the grants of a file in order: the function, then __all__
            place = mine[1] if key.endswith("#all") else mine[0]
        elif key == "toolz/itertoolz.py#all":
            place = next(p for p in places if p["symbol"] == "__all__")
        elif path == "toolz/itertoolz.py":
            place = next(p for p in places if p["symbol"] == NEW[task][1])
        else:
            place = mine[0]
        lines = self.lines(path)
        tree = place["lines"]["tree"]
        at = tree[0] if place["kind"] == "point" else tree[1]
        if path != "toolz/itertoolz.py" or key.endswith("#all"):
            # (by who inserted each line: another task's blank line is not the old one)
            owners_now = self.owners.get(path, [None] * len(lines))
            k = 0
            while at + k < len(lines) and owners_now[at + k] not in (None, task):
                k += 1
            at += self.rng.randint(0, k)
        lines[at:at] = new
        owners = self.owners.setdefault(path, [None] * (len(lines) - len(new)))
        owners[at:at] = [task] * len(new)
        write(self.repo, path, "".join(lines))
        self.added.setdefault(task, set()).update(new)
        if self.say == "record":
            from hunkwise.shared.state import provenance

            provenance.note(provenance.root_of(self.repo), self.sessions[task], path,
                            [x.encode() for x in new])

    def claims(self, task: str) -> list[str]:
        """What a worker without the hooks answers at shared points: each line of its own
        there, by its number in the tree (and "not mine" for every other)."""
        if self.say != "claim" or self.mode != "points":
            return []
        out = []
        for path, owners in self.owners.items():
            if path == "toolz/itertoolz.py":
                continue  # its function goes in its own range; only __all__ is shared
            out += [f"--claim={path}:{n}" for n, o in enumerate(owners, 1) if o == task]
        quoted = [n for n, line in enumerate(self.lines("toolz/itertoolz.py"), 1)
                  if line == f'    "{NEW[task][0]}",\n']
        out += [f"--claim=toolz/itertoolz.py:{n}" for n in quoted]
        return out + ["--disclaim=all"]

    def expected(self, path: str, accepted: set[str]) -> str:
        """The final tree's file less the lines of the tasks not accepted yet."""
        lines = self.lines(path)
        owners = self.owners[path]
        assert len(owners) == len(lines)
        return "".join(line for line, o in zip(lines, owners, strict=True)
                       if o is None or o in accepted)


def run_trial(tmp: MakeRepo, coord: Cli, worker: Cli, seed: int, *, mode: str,
              say: str = "claim") -> Trial:
    repo = tmp(FILES)
    t = Trial(repo, coord, worker, random.Random(seed), mode, say)
    brief = repo.parent / "briefs"
    brief.mkdir(exist_ok=True)
    for task in NEW:
        name, after = NEW[task]
        args = ["assign", task, "--title", f"Add {name}"]
        if mode == "old":
            args += ["--expect", OLD_EXPECT.format(name=name, after=after)]
        else:
            # the instructions go to the worker alone; the expectation is the result
            (brief / f"{task}.md").write_text(OLD_EXPECT.format(name=name, after=after))
            args += ["--expect", f"toolz.{name} exists and is documented",
                     "--brief-file", str(brief / f"{task}.md")]
        for c in CHECKS:
            args += ["--check", c.format(name=name)]
        for w in plan(task, mode=mode):
            args += ["--write", w]
        ok(coord(repo, *args))
    edits = [(task, key) for task in NEW for key in additions(task, mode=mode)]
    t.rng.shuffle(edits)
    for task, key in edits:
        t.edit(task, key)
    order = list(NEW)
    t.rng.shuffle(order)
    for task in order:
        ok(worker(repo, "done", task, "--summary", f"added {NEW[task][0]}", *t.claims(task),
                  "--commit-message", f"Add {NEW[task][0]}", session=t.sessions[task]))
    return t


def accept_all(t: Trial) -> None:
    final = {p: (t.repo / p).read_text() for p in FILES}
    want = {p: {task: "" for task in NEW} for p in FILES}
    order = list(NEW)
    t.rng.shuffle(order)
    accepted: set[str] = set()
    for task in order:
        accepted.add(task)
        for path in FILES:
            want[path][task] = t.expected(path, accepted) if path in t.owners else FILES[path]
        ok(t.coord(t.repo, "accept", task))
        for path in FILES:
            assert git(t.repo, "show", f"HEAD:{path}") == want[path][task], (task, path)
        trailer = git(t.repo, "show", "-s", "--format=%(trailers:key=Coord-Task,valueonly)")
        assert trailer.strip() == task
    for path in FILES:
        assert git(t.repo, "show", f"HEAD:{path}") == final[path]
    assert git(t.repo, "status", "--porcelain") == ""


# ---- the plan in place, and the work of four workers ------------------------------------------

def test_the_plan_is_four_assigns_with_no_line_number_found_by_hand(make_repo: MakeRepo,
                                                                     coord: Cli, worker: Cli) -> None:
    t = run_trial(make_repo, coord, worker, 1, mode="points")
    tasks = {row["id"]: row for row in ok(coord(t.repo, "status"))["tasks"]}
    # every task holds the same shared points, shown with their names
    for task in NEW:
        grants = tasks[task]["grants"]
        assert grants[1].startswith("toolz/itertoolz.py::__all__+ (+")
        assert grants[0].startswith(f"toolz/itertoolz.py::{NEW[task][1]}+ (+")
        assert all(p["lines"]["tree"] is not None for p in tasks[task]["places"])
    # the reports were delivered; the files hold all four
    final = (t.repo / "toolz/itertoolz.py").read_text()
    for name, _after in NEW.values():
        assert f"def {name}(seq):" in final and f'    "{name}",\n' in final


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_functions_by_symbol_range_accept_exactly_in_any_order(make_repo: MakeRepo, coord: Cli,
                                                               worker: Cli, seed: int) -> None:
    """Without shared points (each task only adds its function inside its given
    function's symbol range): what attribution already carries."""
    t = run_trial(make_repo, coord, worker, seed, mode="ranges")
    accept_all(t)


@pytest.mark.parametrize(("seed", "say"), [(1, "claim"), (2, "record"), (3, "record")])
def test_the_whole_plan_accepts_exactly_in_any_order(make_repo: MakeRepo, coord: Cli,
                                                     worker: Cli, seed: int, say: str) -> None:
    """Each worker's lines at the shared points: claimed in its report (no hooks), or
    settled by what the hooks recorded of each session's writes (no claim at all)."""
    t = run_trial(make_repo, coord, worker, seed, mode="points", say=say)
    accept_all(t)


@pytest.mark.parametrize("seed", [4])
def test_the_old_plan_with_the_gap_trick_still_accepts_exactly(make_repo: MakeRepo, coord: Cli,
                                                               worker: Cli, seed: int) -> None:
    accept_all(run_trial(make_repo, coord, worker, seed, mode="old"))


def next_sizes(t: Trial, *args: str) -> list[int]:
    """The characters `coord next` prints for each of the four reports."""
    sizes = []
    for _ in NEW:
        r = t.coord(t.repo, "next", *args, json_out=False)
        assert r.code == 0 and "inbox empty" not in r.stdout
        sizes.append(len(r.stdout))
    return sizes


def test_review_costs_a_third_of_what_it_did(make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
    """The trial's four reports: the old plan read with the old view (`--full`, which is
    it), against the plan with briefs read with the default view."""
    before = next_sizes(run_trial(make_repo, coord, worker, 5, mode="old"), "--full")
    after = next_sizes(run_trial(make_repo, coord, worker, 5, mode="old_brief"))
    print(f"coord next, characters per task: before {before}, after {after}")
    assert sum(after) * 3 <= sum(before), (before, after)
