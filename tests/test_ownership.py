"""The ownership core, called directly: grants, ids, conflict rules, attribution, re-mapping.

Attribution and re-mapping run on hunks that real git produced in temporary repositories,
so the tests hold for the -U0 shapes git really prints (insertions as `-p,0`, deletions
as `+q,0`), not for hand-made ones.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hunkwise.shared.errors import UsageError
from hunkwise.shared.hunks import diff, snapshot
from hunkwise.shared.hunks.diff import FileChange, Hunk
from hunkwise.shared.hunks.ownership import (
    attribute,
    find_conflicts,
    glob_matches,
    map_range,
    patterns_may_overlap,
)
from hunkwise.shared.hunks.taskview import view
from hunkwise.shared.state.models import Task, TaskState, check_task_id, parse_grant

from testing.cli import assign_and_start
from testing.repo import MakeRepo, git, git_bytes, numbered, set_line, write


def task(tid: str, *grants: str, state: TaskState = TaskState.ASSIGNED,
         exclusive: bool = False) -> Task:
    return Task(id=tid, title=f"title of {tid}", expect="it works", state=state,
                grants=[parse_grant(g) for g in grants], exclusive=exclusive,
                created_at=0.0, updated_at=0.0)


def conflicts(new: list[str], others: list[Task], files: list[str], *,
              exclusive: bool = False, serial: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    found = find_conflicts([parse_grant(g) for g in new], exclusive, others, files, list(serial))
    return [(c.task_id, c.path) for c in found]


def edit_lines(repo: Path, path: str, fn: Callable[[list[str]], list[str]]) -> None:
    p = repo / path
    p.write_text("".join(fn(p.read_text().splitlines(keepends=True))))


def tree_changes(repo: Path) -> list[FileChange]:
    snap = snapshot.take(repo)
    return diff.diff_trees(repo, snap.head_tree, snap.tree)


def hunks_between(make_repo: MakeRepo, before: str, after: str) -> list[Hunk]:
    """The -U0 hunks git prints for f.txt going from `before` to `after`."""
    repo = make_repo({"f.txt": before})
    write(repo, "f.txt", after)
    (change,) = tree_changes(repo)
    return change.hunks


# ---- parse_grant ------------------------------------------------------------------------

@pytest.mark.parametrize("text, path", [
    ("src/*.py", "src/*.py"),
    ("docs/", "docs/"),
    ("./README.md", "README.md"),
    ("**/*.sql", "**/*.sql"),
])
def test_parse_glob_grant_keeps_the_pattern(text: str, path: str) -> None:
    g = parse_grant(text)
    assert (g.kind, g.path, str(g)) == ("glob", path, path)


def test_parse_range_grant_reads_path_and_inclusive_lines() -> None:
    g = parse_grant("src/app.py:3-17")
    assert (g.kind, g.path, g.start, g.end) == ("range", "src/app.py", 3, 17)
    assert str(g) == "src/app.py:3-17"
    assert str(parse_grant("./a.txt:5-5")) == "a.txt:5"  # one line prints as PATH:N


def test_parse_range_keeps_colons_in_the_path() -> None:
    g = parse_grant("notes:v2.txt:1-2")
    assert (g.kind, g.path, g.start, g.end) == ("range", "notes:v2.txt", 1, 2)


@pytest.mark.parametrize("text, why", [
    ("../x", "'..'"),
    ("a/../../b", "'..'"),
    ("../x:1-2", "'..'"),
    ("src/../../etc/passwd:1-2", "'..'"),
    ("/etc/passwd:1-3", "absolute"),
    ("C:\\Windows\\x:1-2", "absolute"),
    (".git/config", ".git"),
    (".git/config:1-2", ".git"),
    ("sub/.git/x", ".git"),
    ("sub/.GIT/hooks/pre-commit", ".git"),
    ("f.txt:9-3", "reversed"),
    ("f.txt:0-4", "numbered from 1"),
    ("f.txt:0-0", "numbered from 1"),
    ("f\0.txt", "NUL"),
    ("f\0.txt:1-2", "NUL"),
    ("a\x1bb", "control"),
    ("f\tx.txt:1-2", "control"),
    ("src\\a.py", "backslash"),
    ("src\\a.py:1-2", "backslash"),
    ("", "empty"),
    ("   ", "empty"),
    ("!src/*.py", "negated"),
    ("src/*.py:1-4", "plain file path"),
])
def test_parse_refuses_hostile_grants(text: str, why: str) -> None:
    with pytest.raises(UsageError) as e:
        parse_grant(text)
    assert e.value.exit_code == 2
    assert why.lower() in e.value.message.lower()
    assert "\n" not in e.value.message


def test_leading_slash_glob_is_refused_as_an_absolute_path() -> None:
    # Globs are anchored at the repo root anyway; a leading "/" is far likelier to be a
    # host path typed by mistake than a gitignore anchor, so it is refused.
    with pytest.raises(UsageError) as e:
        parse_grant("/etc/passwd")
    assert "absolute" in e.value.message
    assert glob_matches("etc/passwd", "etc/passwd")
    assert not glob_matches("etc/passwd", "sub/etc/passwd")


# ---- task ids ---------------------------------------------------------------------------

@pytest.mark.parametrize("tid", ["task-001", "a", "A.b_c-9", "9", "x" * 64, "v1.2"])
def test_valid_task_ids_pass(tid: str) -> None:
    assert check_task_id(tid) == tid


@pytest.mark.parametrize("tid", [
    "", "..", "a..b", "x" * 65, "-rf", ".hidden", "_x", "a/b", "a\\b", "a b", "a\nb",
    "task-1\n", "tâche", "a\0b",
])
def test_malformed_task_ids_are_usage_errors(tid: str) -> None:
    with pytest.raises(UsageError) as e:
        check_task_id(tid)
    assert e.value.exit_code == 2
    assert "malformed task id" in e.value.message


# ---- patterns_may_overlap (files not created yet) -----------------------------------------

@pytest.mark.parametrize("a, b", [
    ("src/a/*.py", "src/b/*.py"),
    ("*.py", "*.md"),
    ("docs/*.md", "src/**"),
    ("a.txt", "b.txt"),
    ("src", "srcx/a.py"),
    ("lib/", "libs/x.py"),
    ("*.py", "src/"),  # root-anchored: *.py names root entries only
])
def test_disjoint_patterns_do_not_overlap(a: str, b: str) -> None:
    assert not patterns_may_overlap(a, b)
    assert not patterns_may_overlap(b, a)


@pytest.mark.parametrize("a, b", [
    ("a.txt", "a.txt"),
    ("src", "src/x.py"),
    ("src/", "src/x.py"),
    ("src/*.py", "src/new.py"),
    ("src/**", "src/deep/er/x.md"),
    ("src/*.py", "src/**/*.py"),
    ("**/*.py", "src/a.py"),
    ("src/a*", "src/ab/x.md"),
])
def test_overlapping_patterns_overlap_both_ways(a: str, b: str) -> None:
    assert patterns_may_overlap(a, b)
    assert patterns_may_overlap(b, a)


def test_glob_matching_a_directory_overlaps_deeper_glob() -> None:
    # Both patterns match etc/site.d/a.conf, which a worker may create tomorrow.
    assert glob_matches("etc/*.d", "etc/site.d/a.conf")
    assert glob_matches("etc/**/*.conf", "etc/site.d/a.conf")
    assert patterns_may_overlap("etc/*.d", "etc/**/*.conf")


# ---- find_conflicts ---------------------------------------------------------------------

FILES = ["src/a.py", "src/b.py", "docs/x.md", "f.txt", "schema.sql", "README.md"]


def test_glob_vs_glob_on_an_existing_file_conflicts() -> None:
    held = task("task-001", "src/*.py")
    assert conflicts(["src/a.py"], [held], FILES) == [("task-001", "src/a.py")]
    assert conflicts(["**/*.py"], [held], FILES)[0] == ("task-001", "src/a.py")


def test_globs_on_different_files_do_not_conflict() -> None:
    held = task("task-001", "src/a.py", "docs/")
    assert conflicts(["src/b.py", "README.md"], [held], FILES) == []


def test_glob_vs_range_of_the_same_file_conflicts() -> None:
    held = task("task-001", "f.txt:3-5")
    assert conflicts(["f.txt"], [held], FILES) == [("task-001", "f.txt")]
    assert conflicts(["*.txt"], [held], FILES) == [("task-001", "f.txt")]
    # and the other way round: a range inside a file someone holds whole
    whole = task("task-002", "*.txt")
    assert conflicts(["f.txt:8-9"], [whole], FILES) == [("task-002", "f.txt")]


def test_overlapping_ranges_conflict() -> None:
    held = task("task-001", "f.txt:3-5")
    for new in ("f.txt:5-9", "f.txt:1-3", "f.txt:4-4", "f.txt:1-10"):
        assert conflicts([new], [held], FILES) == [("task-001", "f.txt")], new


def test_disjoint_and_adjacent_ranges_are_allowed() -> None:
    held = task("task-001", "f.txt:3-5")
    assert conflicts(["f.txt:6-9"], [held], FILES) == []
    assert conflicts(["f.txt:1-2"], [held], FILES) == []
    assert conflicts(["f.txt:20-30"], [held], FILES) == []


def test_exclusive_new_task_excludes_disjoint_ranges() -> None:
    held = task("task-001", "f.txt:3-5")
    assert conflicts(["f.txt:7-9"], [held], FILES, exclusive=True) == [("task-001", "f.txt")]


def test_exclusive_held_task_excludes_disjoint_ranges() -> None:
    held = task("task-001", "f.txt:3-5", exclusive=True)
    assert conflicts(["f.txt:7-9"], [held], FILES) == [("task-001", "f.txt")]
    # exclusivity is about the files matched, not the whole repo
    assert conflicts(["README.md"], [held], FILES) == []


def test_serial_path_excludes_disjoint_ranges() -> None:
    held = task("task-001", "schema.sql:1-2")
    assert conflicts(["schema.sql:10-12"], [held], FILES) == []
    assert conflicts(["schema.sql:10-12"], [held], FILES, serial=("*.sql",)) == [
        ("task-001", "schema.sql")]
    # a serial pattern on another file changes nothing here
    assert conflicts(["f.txt:7-9"], [task("task-002", "f.txt:1-2")], FILES,
                     serial=("*.sql",)) == []


@pytest.mark.parametrize("state", [TaskState.ACCEPTED, TaskState.REJECTED])
def test_inactive_tasks_hold_nothing(state: TaskState) -> None:
    done = task("task-001", "f.txt", "src/*.py", state=state, exclusive=True)
    assert conflicts(["f.txt", "src/new/*.py", "src/a.py"], [done], FILES) == []


@pytest.mark.parametrize("state", [TaskState.IN_PROGRESS, TaskState.REPORTED,
                                   TaskState.CHANGES_REQUESTED, TaskState.DEFERRED])
def test_every_other_state_holds_its_grants(state: TaskState) -> None:
    held = task("task-001", "f.txt", state=state)
    assert conflicts(["f.txt"], [held], FILES) == [("task-001", "f.txt")]


def test_globs_on_files_not_created_yet_decide_on_patterns() -> None:
    held = task("task-001", "src/new/**")
    assert [t for t, _ in conflicts(["src/new/*.py"], [held], FILES)] == ["task-001"]
    assert conflicts(["src/other/*.py"], [held], FILES) == []


def test_every_clashing_task_is_reported() -> None:
    a = task("task-001", "f.txt:1-2")
    b = task("task-002", "f.txt:8-9")
    c = task("task-003", "README.md")
    assert sorted(conflicts(["f.txt"], [a, b, c], FILES)) == [
        ("task-001", "f.txt"), ("task-002", "f.txt")]


# ---- attribute() on real diffs ---------------------------------------------------------

@pytest.fixture
def ten(make_repo: MakeRepo) -> Path:
    return make_repo({"f.txt": numbered(10), "other.txt": "x\n"})


def test_hunk_inside_one_range_is_owned(ten: Path) -> None:
    set_line(ten, "f.txt", 4, "line four, edited")
    a, b = task("task-001", "f.txt:1-5"), task("task-002", "f.txt:6-10")
    att = view(ten, [a, b]).attribution
    assert list(att.owned) == ["task-001"]
    (ch,) = att.owned["task-001"]
    assert ch.path == "f.txt" and [(h.old_start, h.old_lines) for h in ch.hunks] == [(4, 1)]
    assert att.unowned == [] and att.conflicts == []


def test_each_range_holder_owns_its_own_hunks(ten: Path) -> None:
    set_line(ten, "f.txt", 2, "two")
    set_line(ten, "f.txt", 9, "nine")
    a, b = task("task-001", "f.txt:1-5"), task("task-002", "f.txt:6-10")
    att = view(ten, [a, b]).attribution
    assert [h.old_start for h in att.owned["task-001"][0].hunks] == [2]
    assert [h.old_start for h in att.owned["task-002"][0].hunks] == [9]


def test_a_hunk_git_prints_across_two_ranges_is_divided_between_them(ten: Path) -> None:
    """Attribution is by region, never by the shape of git's hunk (old lines 5-6): each
    range's edge line was edited in place, so each edit is its range's."""
    set_line(ten, "f.txt", 5, "line 50")
    set_line(ten, "f.txt", 6, "line 60")
    a, b = task("task-001", "f.txt:1-5"), task("task-002", "f.txt:6-10")
    att = view(ten, [a, b]).attribution
    assert att.conflicts == [] and att.ambiguous == []
    got = {t: [(h.old_start, h.old_lines, h.added) for h in chs[0].hunks]
           for t, chs in att.owned.items()}
    assert got == {"task-001": [(5, 1, b"line 50\n")], "task-002": [(6, 1, b"line 60\n")]}


def test_two_new_lines_where_two_edge_lines_were_are_contested(ten: Path) -> None:
    """Nothing of the old edge lines is left: each range replaced its own, or one replaced
    its own by both and the other deleted its own. The two new lines are contested."""
    set_line(ten, "f.txt", 5, "five")
    set_line(ten, "f.txt", 6, "six")
    a, b = task("task-001", "f.txt:1-5"), task("task-002", "f.txt:6-10")
    att = view(ten, [a, b]).attribution
    assert att.conflicts == []
    (amb,) = att.ambiguous
    assert amb.tasks == ["task-001", "task-002"]
    assert (amb.hunk.new_start, amb.hunk.new_lines, amb.hunk.added) == (5, 2, b"five\nsix\n")


def test_a_region_s_own_edit_stays_its_own_whatever_git_prints(ten: Path) -> None:
    set_line(ten, "f.txt", 4, "four")
    set_line(ten, "f.txt", 7, "seven")
    a, b = task("task-001", "f.txt:1-5"), task("task-002", "f.txt:6-10")
    att = view(ten, [a, b]).attribution
    got = {t: [(h.old_start, h.added) for h in chs[0].hunks] for t, chs in att.owned.items()}
    assert got == {"task-001": [(4, b"four\n")], "task-002": [(7, b"seven\n")]}


def test_insertion_on_the_boundary_of_adjacent_ranges_is_ambiguous(ten: Path) -> None:
    edit_lines(ten, "f.txt", lambda rows: rows[:5] + ["new\n"] + rows[5:])  # after line 5
    a, b = task("task-001", "f.txt:1-5"), task("task-002", "f.txt:6-10")
    att = view(ten, [a, b]).attribution
    assert att.owned == {} and att.conflicts == []
    (amb,) = att.ambiguous
    assert (amb.hunk.old_start, amb.hunk.old_lines) == (5, 0)
    assert amb.tasks == ["task-001", "task-002"]


@pytest.mark.parametrize("after, owner", [(2, "task-001"), (7, "task-001"), (0, None), (8, None)])
def test_insertion_belongs_from_start_minus_one_to_end(ten: Path, after: int,
                                                       owner: str | None) -> None:
    edit_lines(ten, "f.txt", lambda rows: rows[:after] + ["new\n"] + rows[after:])
    att = view(ten, [task("task-001", "f.txt:3-7")]).attribution
    if owner:
        assert list(att.owned) == [owner] and att.unowned == []
    else:
        assert att.owned == {} and [h.old_start for _, h in att.unowned] == [after]


def test_change_outside_every_grant_is_unowned(ten: Path) -> None:
    set_line(ten, "f.txt", 9, "nine")
    write(ten, "other.txt", "y\n")
    write(ten, "brand-new.txt", "hello\n")
    att = view(ten, [task("task-001", "f.txt:1-5")]).attribution
    assert att.owned == {} and att.conflicts == []
    got = sorted((ch.path, h.old_start if h else None) for ch, h in att.unowned)
    assert got == [("brand-new.txt", None), ("f.txt", 9), ("other.txt", 1)]


def test_hunk_partly_outside_the_range_is_not_owned(ten: Path) -> None:
    set_line(ten, "f.txt", 5, "five")
    set_line(ten, "f.txt", 6, "six")
    att = view(ten, [task("task-001", "f.txt:1-5")]).attribution
    assert att.owned == {}
    # reported once, as unowned or as a conflict, so that nobody stages it
    reported = [(ch.path, h.old_start) for ch, h in att.unowned] + \
        [(ch.path, h.old_start) for ch, h, _ in att.conflicts]
    assert reported == [("f.txt", 5)]


def test_glob_owns_whole_files_new_and_deleted(ten: Path) -> None:
    write(ten, "docs/new.md", "# new\n")
    (ten / "other.txt").unlink()
    att = view(ten, [task("task-001", "docs/"), task("task-002", "other.txt")]).attribution
    assert [c.path for c in att.owned["task-001"]] == ["docs/new.md"]
    assert [(c.path, c.kind) for c in att.owned["task-002"]] == [("other.txt", "deleted")]
    assert att.unowned == [] and att.conflicts == []


def test_deleting_a_file_granted_by_ranges_only_is_not_owned(ten: Path) -> None:
    (ten / "f.txt").unlink()
    att = view(ten, [task("task-001", "f.txt:1-10")]).attribution
    assert att.owned == {}
    assert [(ch.path, ch.kind) for ch, _ in att.unowned + [(c, h) for c, h, _ in att.conflicts]] \
        == [("f.txt", "deleted")]


def test_chmod_of_a_file_granted_by_ranges_only_is_not_owned(ten: Path) -> None:
    git(ten, "config", "core.fileMode", "true")
    (ten / "f.txt").chmod(0o755)
    att = view(ten, [task("task-001", "f.txt:1-10")]).attribution
    assert att.owned == {}
    assert [(ch.path, ch.kind) for ch, _ in att.unowned] == [("f.txt", "mode")]


def test_whole_file_change_under_two_range_holders_is_a_conflict(ten: Path) -> None:
    (ten / "f.txt").unlink()
    a, b = task("task-001", "f.txt:1-5"), task("task-002", "f.txt:6-10")
    att = view(ten, [a, b]).attribution
    assert att.owned == {}
    ((ch, h, holders),) = att.conflicts
    assert (ch.path, h, holders) == ("f.txt", None, ["task-001", "task-002"])


def test_inactive_tasks_own_nothing_in_the_tree(ten: Path) -> None:
    set_line(ten, "f.txt", 2, "two")
    att = view(ten, [task("task-001", "f.txt", state=TaskState.ACCEPTED)]).attribution
    assert att.owned == {} and [ch.path for ch, _ in att.unowned] == ["f.txt"]


def test_attribute_on_diff_trees_between_commits(make_repo: MakeRepo) -> None:
    repo = make_repo({"f.txt": numbered(10)})
    base = git(repo, "rev-parse", "HEAD").strip()
    set_line(repo, "f.txt", 8, "eight")
    git(repo, "commit", "-qam", "edit")
    changes = diff.diff_trees(repo, base, "HEAD")
    att = attribute(changes, [task("task-001", "f.txt:1-4"), task("task-002", "f.txt:5-10")])
    assert list(att.owned) == ["task-002"]
    assert att.owned["task-002"][0].hunks[0].removed == b"line 8\n"
    assert att.owned["task-002"][0].hunks[0].added == b"eight\n"


# ---- map_range through real hunks ------------------------------------------------------

def test_insertion_above_shifts_the_range_down(make_repo: MakeRepo) -> None:
    before = numbered(10)
    rows = before.splitlines(keepends=True)
    hunks = hunks_between(make_repo, before, "".join(rows[:1] + ["a\n", "b\n"] + rows[1:]))
    assert map_range(5, 8, hunks) == (7, 10)


def test_deletion_above_shifts_the_range_up(make_repo: MakeRepo) -> None:
    rows = numbered(10).splitlines(keepends=True)
    hunks = hunks_between(make_repo, "".join(rows), "".join(rows[:1] + rows[3:]))  # drop 2-3
    assert map_range(5, 8, hunks) == (3, 6)


def test_change_inside_grows_the_end(make_repo: MakeRepo) -> None:
    rows = numbered(10).splitlines(keepends=True)
    hunks = hunks_between(make_repo, "".join(rows),
                          "".join(rows[:5] + ["x\n", "y\n", "z\n"] + rows[6:]))  # line 6 -> 3
    assert map_range(5, 8, hunks) == (5, 10)


def test_change_inside_shrinks_the_end(make_repo: MakeRepo) -> None:
    rows = numbered(10).splitlines(keepends=True)
    hunks = hunks_between(make_repo, "".join(rows), "".join(rows[:5] + rows[7:]))  # drop 6-7
    assert map_range(5, 8, hunks) == (5, 6)


def test_change_below_leaves_the_range(make_repo: MakeRepo) -> None:
    rows = numbered(12).splitlines(keepends=True)
    hunks = hunks_between(make_repo, "".join(rows), "".join(rows[:10] + ["new\n"] + rows[11:]))
    assert map_range(5, 8, hunks) == (5, 8)
    hunks = hunks_between(make_repo, "".join(rows), "".join(rows[:10]))  # drop 11-12
    assert map_range(5, 8, hunks) == (5, 8)


def test_foreign_insertion_at_start_minus_one_pushes_the_range(make_repo: MakeRepo) -> None:
    rows = numbered(10).splitlines(keepends=True)
    hunks = hunks_between(make_repo, "".join(rows), "".join(rows[:4] + ["a\n", "b\n"] + rows[4:]))
    assert (hunks[0].old_start, hunks[0].old_lines) == (4, 0)
    assert map_range(5, 8, hunks) == (7, 10)
    assert map_range(5, 8, hunks, [False]) == (7, 10)


def test_owned_insertion_at_start_minus_one_joins_the_range(make_repo: MakeRepo) -> None:
    rows = numbered(10).splitlines(keepends=True)
    hunks = hunks_between(make_repo, "".join(rows), "".join(rows[:4] + ["a\n", "b\n"] + rows[4:]))
    assert map_range(5, 8, hunks, [True]) == (5, 10)


def test_mapped_range_still_covers_the_same_text(make_repo: MakeRepo) -> None:
    """Shifts above, growth inside and edits below together: the range keeps its lines."""
    rows = numbered(20).splitlines(keepends=True)
    new = (rows[:2] + ["top\n"] + rows[2:5]           # insert after 2
           + rows[6:8] + ["in1\n", "in2\n"] + rows[8:12]  # drop 6; insert after 8 (inside)
           + ["bottom\n"] + rows[14:])                 # replace 13-14 (below)
    hunks = hunks_between(make_repo, "".join(rows), "".join(new))
    s, e = map_range(5, 12, hunks)
    kept = [r for r in new[s - 1:e]]
    assert kept == ["line 5\n", "line 7\n", "line 8\n", "in1\n", "in2\n",
                    "line 9\n", "line 10\n", "line 11\n", "line 12\n"]


def test_deleting_the_whole_range_leaves_an_insertion_point(make_repo: MakeRepo) -> None:
    rows = numbered(10).splitlines(keepends=True)
    hunks = hunks_between(make_repo, "".join(rows), "".join(rows[:4] + rows[8:]))  # drop 5-8
    s, e = map_range(5, 8, hunks)
    assert e == s - 1 == 4


def test_literal_grants_match_exactly_as_pathspec_does() -> None:
    """Literal paths, `dir/` and `dir/**` are decided with string compares (they are most
    grants, met by every changed file); every other pattern goes through pathspec. Over
    every pattern and path built from these parts, both must answer alike."""
    import itertools

    from hunkwise.shared.hunks import globs

    parts = ["a", "b", "ab", "a.py", "a b", "é", "-x"]
    odd = ["!a", "#a", "a ", ".", "..", "a\\b", "a*", "[ab]", "a?"]
    stems = ["/".join(c) for n in (1, 2, 3) for c in itertools.product(parts[:4], repeat=n)]
    stems += [f"{s}/{o}" for s in ("a", "a/b") for o in odd] + odd + ["a//b", "a/é/-x", "a b/a"]
    patterns = [lead + s + tail for s in stems for lead in ("", "/") for tail in ("", "/", "/**")]
    paths = ["/".join(c) for n in (1, 2, 3, 4) for c in itertools.product(parts[:4], repeat=n)]
    paths += ["a b/a", "é/a", "a/é/-x/y", "a/", "a/b/", "ab/", "a.py/x"]
    plain = 0
    for pattern in patterns:
        plain += globs._plain(pattern) is not None
        for path in paths:
            assert globs.glob_matches(pattern, path) == globs._glob_matches(pattern, path), \
                (pattern, path)
    assert plain > len(patterns) // 2  # the string compares did decide most of them


def test_a_directory_glob_covers_what_is_below_it(make_repo, coord, worker) -> None:
    assert glob_matches("src/*", "src/sub/b.py")
    assert not glob_matches("src/*.py", "src/sub/b.py")
    repo = make_repo({"src/a.py": "a\n", "src/sub/b.py": "b\n"})
    assign_and_start(coord, worker, repo, "A", "src/*",
          lambda: (write(repo, "src/a.py", "A\n"), write(repo, "src/sub/b.py", "B\n")))
    done = worker(repo, "done", "A")
    assert done.code == 0 and done.doc["report"]["changes"] == 2
    assert coord(repo, "accept", "A").doc["paths"] == ["src/a.py", "src/sub/b.py"]


def test_a_glob_and_a_range_of_one_task_on_one_file_do_not_conflict(make_repo, coord, worker) -> None:
    repo = make_repo({"f.txt": numbered(8)})
    assert coord(repo, "assign", "D", "--title", "t", "--expect", "e", "--write", "f.txt",
                 "--write", "f.txt:1-3").code == 0
    assert worker(repo, "start", "D").code == 0
    # Lines 3-4: partly outside the range, but the task's glob holds the whole file.
    (repo / "f.txt").write_text(numbered(8).replace("line 3\nline 4\n", "three\nfour\n"))
    assert worker(repo, "done", "D").doc["report"]["hunks"] == 1
    r = coord(repo, "accept", "D")
    assert r.code == 0, r.stdout + r.stderr
    assert git_bytes(repo, "show", "HEAD:f.txt") == (repo / "f.txt").read_bytes()
