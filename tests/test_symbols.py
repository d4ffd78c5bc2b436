"""Grants by symbol: `--write PATH::NAME` resolves at assign to the symbol's span, is kept
and re-mapped as a range, and is shown with its name (shared/hunks/symbols.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hunkwise.shared.errors import UsageError
from hunkwise.shared.hunks.symbols import find
from hunkwise.shared.state import store

from testing.cli import Cli, ok
from testing.repo import MakeRepo, git, write

MOD = """\
\"\"\"A module.\"\"\"

import os

__all__ = [
    "alpha",
    "beta",
]


# alpha's comment
# on two lines
@cached
@other(1)
def alpha(x):
    return x


def beta(y):
    return y
class K:
    def m(self):
        pass

    async def n(self):
        pass
LIMIT: int = 3
"""


def lines_of(text: str, start: int, end: int) -> list[str]:
    return text.split("\n")[start - 1:end]


def test_a_function_spans_its_comments_and_decorators_through_the_blank_lines_after_it() -> None:
    s = find(MOD.encode(), "m.py", "alpha")
    assert lines_of(MOD, s.start, s.end) == [
        "# alpha's comment", "# on two lines", "@cached", "@other(1)", "def alpha(x):",
        "    return x", "", ""]
    # its insertion point is after the span: a new function goes right before beta
    assert s.point == s.end
    assert lines_of(MOD, s.point + 1, s.point + 1) == ["def beta(y):"]


def test_a_symbol_with_no_blank_after_it_ends_on_its_last_line() -> None:
    s = find(MOD.encode(), "m.py", "beta")
    assert lines_of(MOD, s.start, s.end) == ["def beta(y):", "    return y"]


def test_a_method_and_a_class_and_an_annotated_assignment() -> None:
    m = find(MOD.encode(), "m.py", "K.m")
    assert lines_of(MOD, m.start, m.end) == ["    def m(self):", "        pass", ""]
    n = find(MOD.encode(), "m.py", "K.n")
    assert lines_of(MOD, n.start, n.end) == ["    async def n(self):", "        pass"]
    k = find(MOD.encode(), "m.py", "K")
    assert lines_of(MOD, k.start, k.start) == ["class K:"] and k.end == n.end
    lim = find(MOD.encode(), "m.py", "LIMIT")
    assert lines_of(MOD, lim.start, lim.end) == ["LIMIT: int = 3"]
    assert lim.point is None  # one line: no inside to insert into


def test_the_point_of_an_assignment_is_inside_it_before_its_last_line() -> None:
    s = find(MOD.encode(), "m.py", "__all__")
    assert lines_of(MOD, s.start, s.end) == ["__all__ = [", '    "alpha",', '    "beta",', "]", "", ""]
    assert lines_of(MOD, s.point, s.point) == ['    "beta",']


@pytest.mark.parametrize(("source", "name", "words"), [
    (MOD, "gamma", ["gamma is not defined in m.py"]),
    (MOD, "alpah", ["did you mean alpha"]),
    (MOD, "Nope.m", ["no class Nope"]),
    (MOD, "K.zz", ["zz is not defined in class K of m.py"]),
    ("def f():\n    pass\n\n\ndef f():\n    pass\n", "f", ["defined 2 times", "lines 1, 5"]),
    ("__all__ = ['a']\n__all__ += ['b']\n", "__all__", ["defined 2 times"]),
    ("def f(:\n    pass\n", "f", ["does not parse", "line 1"]),
    ("x = 1\ry = 2\n", "x", ["bare carriage return"]),
])
def test_bad_symbols_are_refused_naming_them(source: str, name: str, words: list[str]) -> None:
    with pytest.raises(UsageError) as e:
        find(source.encode(), "m.py", name)
    assert e.value.exit_code == 2
    for w in words:
        assert w in e.value.message


def test_a_symbol_grant_needs_a_python_file() -> None:
    with pytest.raises(UsageError, match="symbol grants need a Python file"):
        find(b"function f() {}\n", "app.js", "f")
    # a script whose shebang names python is Python
    assert find(b"#!/usr/bin/env python3\ndef f():\n    pass\n", "bin/tool", "f").start == 2


def test_crlf_lines_are_numbered_as_git_numbers_them() -> None:
    s = find(b"a = 1\r\n\r\ndef f():\r\n    pass\r\n", "m.py", "f")
    assert (s.start, s.end) == (3, 4)


# ---- through the CLI ------------------------------------------------------------------------

@pytest.fixture
def repo(make_repo: MakeRepo) -> Path:
    return make_repo({"m.py": MOD, "notes.txt": "one\ntwo\n"})


def assign(coord: Cli, repo: Path, tid: str, *writes: str) -> object:
    args = ["assign", tid, "--title", "t", "--expect", "e"]
    for w in writes:
        args += ["--write", w]
    return coord(repo, *args)


def test_assign_by_symbol_stores_a_range_shown_with_its_name(coord: Cli, repo: Path) -> None:
    doc = ok(assign(coord, repo, "A", "m.py::alpha", "m.py::K.m"))
    assert doc["task"]["grants"] == ["m.py::alpha (11-18)", "m.py::K.m (22-24)"]
    state = json.loads((repo / ".git" / "coord" / "state.json").read_text())
    g = state["tasks"]["A"]["grants"][0]
    assert g == {"kind": "range", "path": "m.py", "start": 11, "end": 18, "symbol": "alpha"}


def test_a_symbol_range_follows_history_and_keeps_its_name(coord: Cli, repo: Path) -> None:
    ok(assign(coord, repo, "A", "m.py::beta"))
    write(repo, "m.py", "# a new first line\n# and a second\n" + MOD)
    git(repo, "commit", "-qam", "two lines on top")
    tasks = ok(coord(repo, "status"))["tasks"]
    assert tasks[0]["grants"] == ["m.py::beta (21-22)"]


def test_a_symbol_overlapping_another_tasks_grant_is_refused_naming_both(coord: Cli, repo: Path) -> None:
    ok(assign(coord, repo, "A", "m.py:13"))
    r = assign(coord, repo, "B", "m.py::alpha")
    assert r.code == 3
    msg = r.doc["error"]["message"]
    assert "m.py::alpha (11-18)" in msg and "m.py:13" in msg and "A" in msg
    # a method inside a class another task holds whole conflicts too
    ok(assign(coord, repo, "C", "m.py::K"))
    r = assign(coord, repo, "D", "m.py::K.n")
    assert r.code == 3 and "m.py::K (21-26)" in r.doc["error"]["message"]


def test_unknown_and_unparsable_symbols_exit_2_and_nothing_is_assigned(coord: Cli, repo: Path) -> None:
    for write_ in ("m.py::gamma", "notes.txt::one", "nothere.py::f", "m.py::LIMIT+", "m.py::a-b"):
        r = assign(coord, repo, "A", "m.py:1", write_)
        assert r.code == 2, (write_, r.stdout, r.stderr)
        assert r.stderr.count("\n") == 1
    assert ok(coord(repo, "status"))["tasks"] == []


def test_states_written_before_symbols_read_back_byte_for_byte(coord: Cli, repo: Path) -> None:
    ok(assign(coord, repo, "A", "m.py:3-4", "notes.txt"))
    lay = store.layout(repo)
    before = lay.state_file.read_bytes()
    assert b"symbol" not in before and b"brief" not in before
    store.save(lay, store.load(lay))
    assert lay.state_file.read_bytes() == before


def test_coord_grant_widens_by_symbol_and_worker_start_shows_where_it_is(coord: Cli, worker: Cli,
                                                                         repo: Path) -> None:
    ok(assign(coord, repo, "A", "notes.txt"))
    doc = ok(coord(repo, "grant", "A", "--write", "m.py::beta"))
    assert doc["task"]["grants"] == ["notes.txt", "m.py::beta (19-20)"]
    write(repo, "m.py", "# one more line on top\n" + MOD)
    start = ok(worker(repo, "start", "A"))
    (place,) = start["places"]
    assert place == {"grant": "m.py::beta (19-20)", "kind": "range", "path": "m.py",
                     "symbol": "beta", "lines": {"head": [19, 20], "tree": [20, 21]},
                     "landmark": "def beta(y):"}
