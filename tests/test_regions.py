"""Attribution by region, through the CLI: each case observed on real projects, where
git's -U0 hunks cross a boundary, reproduced on a fresh repo.

The random oracle (tests/test_regions_oracle.py) proves the rule over many scenarios;
these hold the user-visible behaviour of the cases quoted in the report: what `worker done`
asks, what `coord accept` commits, what `coord reject --discard` leaves.
"""

from __future__ import annotations

from pathlib import Path

from hunkwise.shared.state import provenance

from testing.cli import Result, ok
from testing.repo import git, git_bytes, write

A_FN = "def a():\n    return 1\n\n\n"
B_FN = ('def b():\n    """Say b.\n\n    More about b.\n\n    Even more.\n    """\n'
        "    return 2\n")
B_FMT = ''.join(line.rstrip("\n") + ("   \n" if line.strip() else "\n")
                for line in B_FN.splitlines(keepends=True))


def err(r: Result) -> str:
    return r.doc["error"]["message"]


def begin(coord, worker, repo: Path, tid: str, grant: str) -> str:
    ok(coord(repo, "assign", tid, "--title", f"title {tid}", "--expect", "e", "--write", grant))
    session = f"sess-20260101-0900-{tid.lower()}@m"
    ok(worker(repo, "start", tid, "--session", session))
    return session


def head(repo: Path, path: str) -> bytes:
    return git_bytes(repo, "show", f"HEAD:{path}")


def wrote(repo: Path, session: str, path: str, lines: list[str], removed: list[str] = ()) -> None:
    """What the agent hooks record after a session's tool call."""
    root = Path(git(repo, "rev-parse", "--git-common-dir").strip())
    root = (repo / root if not root.is_absolute() else root) / "coord"
    provenance.note(root, session, path, [x.encode() for x in lines],
                    [x.encode() for x in removed])


def test_deleting_a_function_beside_a_reformatted_one_never_mangles_it(make_repo, coord,
                                                                      worker):
    """Was: git matched a's blank lines with b's docstring blanks; `coord accept B`
    committed a file in which `def b():` and its docstring were gone."""
    repo = make_repo({"m.py": A_FN + B_FN})
    begin(coord, worker, repo, "A", "m.py:1-4")
    begin(coord, worker, repo, "B", "m.py:5-12")
    write(repo, "m.py", B_FMT)  # A deleted a(); B reformatted every line of b()
    ok(worker(repo, "done", "A"))
    ok(worker(repo, "done", "B"))
    ok(coord(repo, "accept", "B"))
    assert head(repo, "m.py") == (A_FN + B_FMT).encode()
    ok(coord(repo, "accept", "A"))
    assert head(repo, "m.py") == B_FMT.encode()


def test_discarding_the_deleted_function_never_touches_the_neighbours_lines(make_repo, coord,
                                                                           worker):
    """Was: in the same tree `coord reject A --discard` destroyed B's new `def b():` line,
    and `coord restore B` said nothing was missing."""
    repo = make_repo({"m.py": A_FN + B_FN})
    begin(coord, worker, repo, "A", "m.py:1-4")
    begin(coord, worker, repo, "B", "m.py:5-12")
    write(repo, "m.py", B_FMT)
    ok(coord(repo, "reject", "A", "--note", "keep a", "--discard"))
    assert (repo / "m.py").read_text() == A_FN + B_FMT
    ok(worker(repo, "done", "B"))
    ok(coord(repo, "accept", "B"))
    assert head(repo, "m.py") == (A_FN + B_FMT).encode()


def test_a_decorator_on_a_range_s_first_line_is_never_committed_with_the_neighbour(
        make_repo, coord, worker):
    """Was: A (def a and three blank lines) dropped its third blank line, B added `@cache`
    on its own first line; git printed one hunk, and A's commit carried B's decorator.
    The file cannot tell whose the blank line and the decorator are: with nothing recorded,
    `worker done` asks, and an answer for part of the lines is no answer."""
    repo = make_repo({"m.py": "def a():\n    pass\n\n\n\ndef b():\n    pass\n"})
    begin(coord, worker, repo, "A", "m.py:1-5")
    begin(coord, worker, repo, "B", "m.py:6-7")
    write(repo, "m.py", "def a():\n    pass\n\n\n@cache\ndef b():\n    pass\n")
    r = worker(repo, "done", "B")
    assert r.code == 1 and "m.py:4-5" in err(r) and "A" in err(r)
    r = worker(repo, "done", "B", "--claim", "m.py:5")
    assert r.code == 1 and "answered whole" in err(r)  # line 4 is A's: no whole answer
    # A says the contested lines are not its own: its accept never carries the decorator.
    ok(worker(repo, "done", "A", "--disclaim", "m.py:4-5"))
    r = coord(repo, "accept", "A")
    assert r.code in (0, 1), r.stdout
    assert b"@cache" not in head(repo, "m.py")
    assert (repo / "m.py").read_text() == "def a():\n    pass\n\n\n@cache\ndef b():\n    pass\n"


def test_with_the_hooks_record_nobody_is_asked(make_repo, coord, worker):
    """The same edits with provenance: what each session's tool calls wrote settles it."""
    repo = make_repo({"m.py": "def a():\n    pass\n\n\n\ndef b():\n    pass\n"})
    sa = begin(coord, worker, repo, "A", "m.py:1-5")
    sb = begin(coord, worker, repo, "B", "m.py:6-7")
    write(repo, "m.py", "def a():\n    pass\n\n\n@cache\ndef b():\n    pass\n")
    wrote(repo, sa, "m.py", [], removed=["\n"])
    wrote(repo, sb, "m.py", ["@cache\n"])
    ok(worker(repo, "done", "A"))
    ok(worker(repo, "done", "B"))
    ok(coord(repo, "accept", "B"))
    assert head(repo, "m.py") == b"def a():\n    pass\n\n\n\n@cache\ndef b():\n    pass\n"
    ok(coord(repo, "accept", "A"))
    assert head(repo, "m.py") == (repo / "m.py").read_bytes()


def test_a_helper_appended_beside_a_renamed_neighbour_is_never_the_neighbour_s(
        make_repo, coord, worker):
    """Was: A appended a helper after its function, B renamed `def f3` to `def g3`; git
    printed one hunk and `coord accept B` committed A's helper."""
    base = "def f2():\n    return 2\n\n\ndef f3():\n    return 3\n"
    repo = make_repo({"m.py": base})
    sa = begin(coord, worker, repo, "A", "m.py:1-4")
    sb = begin(coord, worker, repo, "B", "m.py:5-6")
    helper = "def helper():\n    return 0\n\n\n"
    write(repo, "m.py", "def f2():\n    return 2\n\n\n" + helper + "def g3():\n    return 3\n")
    wrote(repo, sa, "m.py", helper.splitlines(keepends=True))
    wrote(repo, sb, "m.py", ["def g3():\n"], removed=["def f3():\n"])
    ok(worker(repo, "done", "A"))
    ok(worker(repo, "done", "B"))
    ok(coord(repo, "accept", "B"))
    assert head(repo, "m.py") == b"def f2():\n    return 2\n\n\ndef g3():\n    return 3\n"
    ok(coord(repo, "accept", "A"))
    assert head(repo, "m.py") == (repo / "m.py").read_bytes()


def test_rewriting_a_body_next_to_an_untouched_neighbour_is_no_straddle(make_repo, coord,
                                                                       worker):
    """Was: a rename plus a new body was refused at `worker done` as straddling the
    neighbour's grant, though the neighbour's lines were untouched. With the hooks' record
    of what A's session wrote, it is A's; without it, the rewritten lines keep nothing of
    A's own, and `worker done` asks rather than guessing."""
    base = "def f1():\n    x = 1\n    return x\n\n\ndef f2():\n    return 2\n"
    repo = make_repo({"m.py": base})
    sa = begin(coord, worker, repo, "A", "m.py:1-5")
    begin(coord, worker, repo, "B", "m.py:6-7")
    body = ["def g1():\n", "    y = 2\n", "    z = y * 3\n", "    return z\n"]
    new = "".join(body) + "\n\ndef f2():\n    return 2\n"
    write(repo, "m.py", new)
    r = worker(repo, "done", "A")
    assert r.code == 1 and "--claim" in err(r) and "straddles" not in err(r)
    wrote(repo, sa, "m.py", body, removed=["def f1():\n", "    x = 1\n", "    return x\n"])
    ok(worker(repo, "done", "A"))
    ok(coord(repo, "accept", "A"))
    assert head(repo, "m.py") == new.encode()
    assert "Coord-Task: A" in git(repo, "log", "-1", "--format=%B")


def test_a_rename_never_carries_the_neighbour_s_uncommitted_edit(make_repo, coord, worker):
    """Was: R renamed util.py to helpers.py (grant helpers.py, by plain `mv`); B held
    util.py:3-4 with an uncommitted edit there, and R's commit held B's edit inside the
    renamed file."""
    util = "def one():\n    return 1\n\ndef two():\n    return 2\n"
    repo = make_repo({"util.py": util})
    begin(coord, worker, repo, "R", "helpers.py")
    begin(coord, worker, repo, "B", "util.py:4-5")
    edited = util.replace("return 2", "return 22")
    write(repo, "util.py", edited)            # B's edit, not yet reported
    (repo / "util.py").rename(repo / "helpers.py")  # R's move carries it along
    ok(worker(repo, "done", "R"))
    root = git(repo, "rev-parse", "HEAD")
    r = coord(repo, "accept", "R")
    assert r.code != 0 and "B" in err(r) and "util.py" in err(r), r.stdout
    assert git(repo, "rev-parse", "HEAD") == root
    assert (repo / "helpers.py").read_text() == edited  # nothing in the tree changed


def test_a_rename_of_untouched_content_is_accepted(make_repo, coord, worker):
    util = "def one():\n    return 1\n\ndef two():\n    return 2\n"
    repo = make_repo({"util.py": util})
    begin(coord, worker, repo, "R", "helpers.py")
    begin(coord, worker, repo, "B", "util.py:4-5")
    (repo / "util.py").rename(repo / "helpers.py")
    ok(worker(repo, "done", "R"))
    ok(coord(repo, "accept", "R"))
    assert head(repo, "helpers.py") == util.encode()


# ---- a range that is the function alone, the blank lines opening the next one ----------------

C_BASE = "def a():\n    return 1\n\n\ndef b():\n    x = 1\n    return x\n"


def test_a_blank_line_appended_to_a_function_is_never_committed_with_the_next(
        make_repo, coord, worker):
    """Was: A (`def a`, lines 1-2) appended a blank line, B (the blank lines and `def b`,
    3-7) changed `x = 1`. The blank could lie strictly inside B's blank run, so B's report
    took it without a question and `coord accept B` committed A's line. Which blank line is
    new the file cannot tell: B is asked; the hooks' record settles it."""
    repo = make_repo({"m.py": C_BASE})
    sa = begin(coord, worker, repo, "A", "m.py:1-2")
    sb = begin(coord, worker, repo, "B", "m.py:3-7")
    new = C_BASE.replace("return 1\n", "return 1\n\n").replace("x = 1", "x = 2")
    write(repo, "m.py", new)
    r = worker(repo, "done", "B")
    assert r.code == 1 and "could be yours or your neighbour's" in err(r)
    wrote(repo, sa, "m.py", ["\n"])
    wrote(repo, sb, "m.py", ["    x = 2\n"], removed=["    x = 1\n"])
    ok(worker(repo, "done", "B"))
    ok(worker(repo, "done", "A"))
    ok(coord(repo, "accept", "B"))
    assert head(repo, "m.py") == C_BASE.replace("x = 1", "x = 2").encode()
    ok(coord(repo, "accept", "A"))
    assert head(repo, "m.py") == new.encode()


def test_a_helper_appended_is_never_committed_with_the_renamed_neighbour(
        make_repo, coord, worker):
    """Was: in the same layout A appended a helper and B only renamed `def b`: `coord
    accept B` committed A's helper, and `coord reject B --discard` deleted it. Without a
    record each is asked (B could have put the helper above its function); with answers,
    each commit is exact."""
    repo = make_repo({"m.py": C_BASE})
    begin(coord, worker, repo, "A", "m.py:1-2")
    begin(coord, worker, repo, "B", "m.py:3-7")
    new = C_BASE.replace("return 1\n", "return 1\n\n\ndef h():\n    return 0\n")
    new = new.replace("def b", "def g")
    write(repo, "m.py", new)
    r = worker(repo, "done", "B")
    assert r.code == 1 and "could be yours or your neighbour's" in err(r)
    ok(worker(repo, "done", "A", "--claim", "m.py"))
    ok(worker(repo, "done", "B", "--disclaim", "all"))
    ok(coord(repo, "accept", "B"))
    assert b"def h" not in head(repo, "m.py") and b"def g" in head(repo, "m.py")
    ok(coord(repo, "accept", "A"))
    assert head(repo, "m.py") == new.encode()


def test_a_neighbour_s_commit_never_grows_a_range_by_lines_git_slid_into_it(
        make_repo, coord, worker):
    """Was: A appended a helper after its function, B (the blank lines and `def b`) put a
    comment above its own; after `coord accept A`, git printed A's helper inside B's blank
    run, B's range grew by it when ranges were re-mapped, and B's accept was refused as a
    stale report. A commit's lines are mapped where they can lie outside another range."""
    repo = make_repo({"m.py": C_BASE})
    sa = begin(coord, worker, repo, "A", "m.py:1-2")
    sb = begin(coord, worker, repo, "B", "m.py:3-7")
    new = C_BASE.replace("return 1\n", "return 1\n\n\ndef h():\n    return 0\n")
    new = new.replace("def b", "# a note\ndef b")
    write(repo, "m.py", new)
    wrote(repo, sa, "m.py", ["\n", "\n", "def h():\n", "    return 0\n"])
    wrote(repo, sb, "m.py", ["# a note\n"])
    ok(worker(repo, "done", "A"))
    ok(worker(repo, "done", "B"))
    ok(coord(repo, "accept", "A"))
    assert head(repo, "m.py") == C_BASE.replace("return 1\n",
                                                "return 1\n\n\ndef h():\n    return 0\n").encode()
    ok(coord(repo, "accept", "B"))
    assert head(repo, "m.py") == new.encode()
