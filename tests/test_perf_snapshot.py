"""Snapshots as cheap as git's own status: the scratch index is kept between commands, so
`add -A` hashes only what changed since the last snapshot and writes nothing when nothing
did, and a heartbeat with nothing new records nothing. What the kept index gives is
always what a fresh copy of the real index gives."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from hunkwise.shared import git as hgit
from hunkwise.shared.hunks import snapshot

from testing.cli import Cli, ok
from testing.repo import MakeRepo, git, numbered, set_line, write
from testing.trace import traced


def fresh_tree(repo: Path) -> str:
    """The snapshot through a throwaway copy of the real index, as every snapshot was."""
    hold = snapshot._try_lock(hgit.git_dir(repo) / snapshot.KEPT / "lock")
    assert hold is not None
    try:
        return snapshot.take(repo).tree  # the kept index is taken: a copy is used
    finally:
        hold()


def settled(repo: Path, *paths: str) -> None:
    """Date these files ten seconds back: written in the same clock tick as an index, a file
    is "racily clean" and git looks at it again on every read (as a real tree's files, not
    written a moment ago, are not)."""

    for p in paths:
        then = time.time() - 10
        os.utime(repo / p, (then, then))


def test_the_kept_index_gives_what_a_fresh_copy_gives(make_repo: MakeRepo) -> None:
    repo = make_repo({"a.txt": "a\n", "b.txt": numbered(5), ".gitignore": "*.log\n",
                      "sub/c.txt": "c\n"})
    steps = [
        lambda: write(repo, "a.txt", "b\n"),  # same size, at once: stat alone cannot tell
        lambda: write(repo, "a.txt", "c\n"),
        lambda: set_line(repo, "b.txt", 2, "B"),
        lambda: write(repo, "new.txt", "untracked\n"),
        lambda: write(repo, "x.log", "ignored\n"),
        lambda: (repo / "sub" / "c.txt").unlink(),
        lambda: git(repo, "add", "-f", "x.log"),  # the real index changes: copied again
        lambda: (repo / "new.txt").chmod(0o755),
        lambda: write(repo, "a.txt", "a\n"),
    ]
    for step in steps:
        step()
        kept = snapshot.take(repo).tree
        assert kept == fresh_tree(repo)
        listed = git(repo, "ls-tree", "-r", "--name-only", kept).split()
        assert ("x.log" in listed) == (step is steps[6] or steps.index(step) > 6)
    assert git(repo, "cat-file", "blob", f"{kept}:a.txt") == "a\n"
    hgit.close_readers()


def test_a_snapshot_of_an_unchanged_tree_writes_no_index(make_repo: MakeRepo) -> None:
    repo = make_repo({"a.txt": numbered(5)})
    set_line(repo, "a.txt", 2, "changed")
    settled(repo, "a.txt")
    first = snapshot.take(repo)
    kept = hgit.git_dir(repo) / snapshot.KEPT / "index"
    before = os.stat(kept)
    assert snapshot.take(repo) == first
    after = os.stat(kept)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    hgit.close_readers()


def test_a_heartbeat_with_nothing_new_reads_no_tree_and_records_nothing(
        make_repo: MakeRepo, coord: Cli, worker: Cli, tmp_path: Path) -> None:
    """Nothing under the task's grants changed since its record, HEAD did not move: the
    heartbeat reads HEAD and no tree. A change in its grants, or HEAD moving, makes the
    record due again; a change elsewhere does not."""
    repo = make_repo({"a.txt": numbered(9), "src/x.txt": numbered(3), "other.txt": "o\n"})
    ok(coord(repo, "assign", "A", "--title", "A", "--expect", "e", "--write", "a.txt",
             "--write", "src/**"))
    ok(worker(repo, "start", "A"))
    set_line(repo, "a.txt", 2, "A's line")
    settled(repo, "a.txt", "src/x.txt")
    ok(worker(repo, "heartbeat", "A"))  # records the change
    run = traced(tmp_path)

    def git_of_heartbeat() -> list[str]:
        # `diff-index --cached`: every worker command names what someone staged, at once
        return sorted(s.split(" ")[0] for s in run("worker", repo, "heartbeat", "A")
                      if not s.startswith("diff-index"))

    assert git_of_heartbeat() == ["cat-file"]
    write(repo, "other.txt", "another task's\n")  # outside A's grants: nothing due
    assert git_of_heartbeat() == ["cat-file"]
    write(repo, "src/new.txt", "A's new file\n")  # a new path in A's glob: due
    # Written "a moment ago" however slowly the steps run: dated a minute ahead, it stays
    # inside the racy window for both heartbeats.
    ahead = time.time() + 60
    os.utime(repo / "src" / "new.txt", (ahead, ahead))
    assert "update-ref" in git_of_heartbeat()
    assert "add" in git_of_heartbeat()  # written a moment ago: its stat data not trusted
    settled(repo, "src/new.txt")
    git_of_heartbeat()
    assert git_of_heartbeat() == ["cat-file"]
    write(repo, "src/new.txt", "A's new line\n")  # the same size, maybe the same tick
    assert "update-ref" in git_of_heartbeat()
    set_line(repo, "a.txt", 4, "more of A's")
    assert "update-ref" in git_of_heartbeat()
    git(repo, "add", "other.txt")
    git(repo, "commit", "-q", "-m", "HEAD moves")
    assert "add" in git_of_heartbeat()  # another base: read the tree again
    assert ok(coord(repo, "status"))["lost"] == []
    write(repo, "a.txt", numbered(9))  # A's work overwritten: the heartbeat says so
    doc = ok(worker(repo, "heartbeat", "A"))
    assert doc["lost"][0]["paths"] == ["a.txt"]
    assert ok(worker(repo, "heartbeat", "A"))["lost"][0]["paths"] == ["a.txt"]  # every time


def test_a_clean_filter_set_after_a_snapshot_applies_to_the_next(make_repo: MakeRepo) -> None:
    """A filter configured once the kept index has seen a file (stat-clean there, and not
    racily so) still applies: the next snapshot is what a fresh copy of the real index
    gives, not the blob the kept index remembers."""
    repo = make_repo({"a.txt": "a\n", "b.txt": "b\n"})
    write(repo, "a.txt", "edited\n")
    settled(repo, "a.txt")
    before = snapshot.take(repo).tree
    assert git(repo, "cat-file", "blob", f"{before}:a.txt") == "edited\n"
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "attributes").write_text("a.txt filter=up\n")
    git(repo, "config", "filter.up.clean", "tr a-z A-Z")
    after = snapshot.take(repo).tree
    assert git(repo, "cat-file", "blob", f"{after}:a.txt") == "EDITED\n"
    assert after == fresh_tree(repo)
    hgit.close_readers()


def test_a_heartbeat_that_finds_its_record_unchanged_while_others_edit_is_quiet_next(
        make_repo: MakeRepo, coord: Cli, worker: Cli, tmp_path: Path) -> None:
    """A heartbeat that had to read the tree (its own file touched, its content the same)
    while another task's edit moved the tree: its record is still current, so the next
    heartbeat reads no tree (was: the stamp was dropped for good in a busy tree, and every
    heartbeat took a snapshot)."""
    repo = make_repo({"a.txt": numbered(9), "other.txt": "o\n"})
    ok(coord(repo, "assign", "A", "--title", "A", "--expect", "e", "--write", "a.txt"))
    ok(worker(repo, "start", "A"))
    set_line(repo, "a.txt", 2, "A's line")
    settled(repo, "a.txt")
    ok(worker(repo, "heartbeat", "A"))  # records the change
    run = traced(tmp_path)

    def git_of_heartbeat() -> list[str]:
        return sorted(s.split(" ")[0] for s in run("worker", repo, "heartbeat", "A")
                      if not s.startswith("diff-index"))

    write(repo, "a.txt", (repo / "a.txt").read_text())  # touched: the same content
    write(repo, "other.txt", "another task's\n")       # and the tree moved elsewhere
    settled(repo, "a.txt", "other.txt")
    assert "add" in git_of_heartbeat()  # due: the tree is read, the record found the same
    assert git_of_heartbeat() == ["cat-file"]  # and then quiet again


def test_a_tree_only_the_steady_fallback_settled_is_never_kept_as_confirmed(
        make_repo: MakeRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where only files under no grant kept changing, the snapshot is taken anyway; but the
    next snapshot giving the same tree must read it again (a grant may cover one of those
    files by then), not take it for one a whole re-read confirmed."""
    repo = make_repo({"a.txt": "a\n", "log.txt": "0\n"})
    write(repo, "log.txt", "1\n")
    settled(repo, "log.txt")

    def agrees(_repo: Path, _base: str, _tree: str, _patch: bool,
               steady: object = None) -> bool:
        return steady is not None  # the whole re-read never agrees; the steady one does

    monkeypatch.setattr(snapshot, "_reread_agrees", agrees)
    tree = snapshot.take(repo, steady=lambda p: p == "a.txt").tree
    stamp = (hgit.git_dir(repo) / snapshot.KEPT / "stamp").read_text().split("\n")
    assert stamp[1] != tree
    hgit.close_readers()


def test_a_widened_grant_makes_the_record_due_again(make_repo: MakeRepo, coord: Cli,
                                                   worker: Cli, tmp_path: Path) -> None:
    """The same file, more of its lines in the grant: the heartbeat reads the tree again
    (the stamp held only the file's stat data)."""
    repo = make_repo({"a.txt": numbered(9)})
    ok(coord(repo, "assign", "A", "--title", "A", "--expect", "e", "--write", "a.txt:1-3"))
    ok(worker(repo, "start", "A"))
    set_line(repo, "a.txt", 2, "A's line")
    set_line(repo, "a.txt", 6, "A's too")
    settled(repo, "a.txt")
    ok(worker(repo, "heartbeat", "A"))
    run = traced(tmp_path)
    quiet_run = sorted(s.split(" ")[0] for s in run("worker", repo, "heartbeat", "A")
                       if not s.startswith("diff-index"))
    assert quiet_run == ["cat-file"]
    ok(coord(repo, "grant", "A", "--write", "a.txt:4-7"))
    assert "add" in [s.split(" ")[0] for s in run("worker", repo, "heartbeat", "A")]


def test_a_second_worker_start_reads_the_tree_once(make_repo: MakeRepo, coord: Cli,
                                                   worker: Cli, tmp_path: Path) -> None:
    """A re-start records the work and shows where the line grants stand now: one read of
    the tree serves both (was: a snapshot for each)."""
    repo = make_repo({"a.txt": numbered(9)})
    ok(coord(repo, "assign", "A", "--title", "A", "--expect", "e", "--write", "a.txt:1-4"))
    s = ok(worker(repo, "start", "A"))["session"]
    set_line(repo, "a.txt", 2, "A's line")
    run = traced(tmp_path)
    reads = [c for c in run("worker", repo, "start", "A", "--session", s)
             if c.split(" ")[0] == "write-tree"]
    assert len(reads) == 1, reads


def _full_record(repo: Path, tid: str) -> tuple[dict, dict, str]:  # type: ignore[type-arg]
    """What a record of the whole tree holds for the task: hunks, whole files, own tree."""
    from hunkwise.shared.hunks.taskview import active_tasks, select, view
    from hunkwise.shared.state import store
    from hunkwise.shared.state.context import open_repo
    from hunkwise.shared.work.recovery import own_trees, record_of

    ctx = open_repo(str(repo))
    state = store.load(ctx.lay)
    hold = snapshot._try_lock(hgit.git_dir(repo) / snapshot.KEPT / "lock")
    try:
        tv = view(repo, active_tasks(state), snapshot.take(repo))  # through a fresh copy
    finally:
        if hold is not None:
            hold()
    sel = select(tv, state.tasks[tid])
    hunks, whole = record_of(sel)
    return hunks, whole, own_trees(repo, tv, [sel])[0]


def _saved(repo: Path, tid: str):  # type: ignore[no-untyped-def]
    from hunkwise.shared.state import store
    from hunkwise.shared.state.context import open_repo

    return store.load(open_repo(str(repo)).lay).tasks[tid].saved


def test_a_heartbeat_reads_its_grants_alone_and_records_what_the_whole_tree_gives(
        make_repo: MakeRepo, coord: Cli, worker: Cli, tmp_path: Path) -> None:
    """A record due at a heartbeat is taken from a snapshot of the paths the task's grants
    and record hold (`add -A` of those alone: at 100,000 files a quarter of the cost). Step
    by step, with another task editing beside it and elsewhere, new files, deletions, and
    a file no task holds come and gone, the record is what a snapshot of the whole tree
    gives."""
    repo = make_repo({"m.py": numbered(12), "src/x.txt": numbered(3), "lib/a.py": "a\n",
                      "lib/b.txt": "b\n", "other/o.txt": "o\n"})
    ok(coord(repo, "assign", "A", "--title", "A", "--expect", "e", "--write", "m.py:1-6",
             "--write", "src/**", "--write", "lib/*.py", "--write", "plan/new.md"))
    ok(coord(repo, "assign", "B", "--title", "B", "--expect", "e", "--write", "m.py:7-12",
             "--write", "other/**", "--write", "lib/b.txt"))
    ok(worker(repo, "start", "A"))
    ok(worker(repo, "start", "B"))
    run = traced(tmp_path)
    steps = [
        lambda: set_line(repo, "m.py", 2, "A's line"),
        lambda: set_line(repo, "m.py", 9, "B's line"),  # beside it, in the same file
        lambda: write(repo, "other/o.txt", "B elsewhere\n"),
        lambda: write(repo, "src/new/deep.txt", "A's new file\n"),
        lambda: write(repo, "lib/c.py", "A's module\n"),
        lambda: write(repo, "lib/b.txt", "B's, under A's glob folder\n"),
        lambda: (repo / "src" / "x.txt").unlink(),
        lambda: write(repo, "plan/new.md", "A's planned file\n"),
        lambda: write(repo, "lib/zz.txt", "no task's, in A's folder\n"),
        lambda: (repo / "lib" / "zz.txt").unlink(),  # in the kept index, gone from the tree
        lambda: write(repo, "src/new/deep.txt", "A's again\n"),
    ]
    for i, step in enumerate(steps):
        step()
        # A record due at every step, however long the steps take: a step that touches
        # none of A's paths would find its stamp current once RACY_S has passed.
        shutil.rmtree(repo / ".git" / "hunkwise" / "quiet", ignore_errors=True)
        calls = run("worker", repo, "heartbeat", "A")
        adds = [c for c in calls if c.startswith("add ")]
        # Its paths alone (and the whole tree again where work was lost: read jointly).
        assert adds and ":(literal)" in adds[0] and "-- ." not in adds[0], (i, adds)
        saved = _saved(repo, "A")
        hunks, whole, own = _full_record(repo, "A")
        assert (saved.hunks, saved.whole) == (hunks, whole), i
        assert saved.own == own, i
        # Another task's work elsewhere is no part of it: HEAD's there.
        assert git(repo, "show", f"{saved.tree}:other/o.txt") == "o\n"
    # Work lost is read against the whole tree, and named.
    (repo / "plan" / "new.md").unlink()
    assert ok(worker(repo, "heartbeat", "A"))["lost"][0]["paths"] == ["plan/new.md"]
    hgit.close_readers()


def test_paths_git_will_not_take_alone_are_read_with_the_whole_tree(
        make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
    """An empty folder granted (no file in it to add), and a grant reached through a
    symbolic link: the heartbeat's record is still taken, from the whole tree."""
    repo = make_repo({"a.txt": "a\n", "real/f.txt": "f\n"})
    (repo / "empty").mkdir()
    (repo / "link").symlink_to("real")
    ok(coord(repo, "assign", "A", "--title", "A", "--expect", "e", "--write", "a.txt",
             "--write", "empty/**", "--write", "link/f.txt"))
    ok(worker(repo, "start", "A"))
    write(repo, "a.txt", "A's\n")
    ok(worker(repo, "heartbeat", "A"))
    saved = _saved(repo, "A")
    assert saved is not None and "a.txt" in (*saved.hunks, *saved.whole)
    assert (saved.hunks, saved.whole, saved.own) == _full_record(repo, "A")
    hgit.close_readers()


def test_a_grant_kept_escaped_is_read_as_the_file_it_names(
        make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
    """A file whose name ends in a space is granted as the glob text `note\\ `: a
    heartbeat's record holds its edits (read with the whole tree, not as a path of that
    spelling), an edit of it alone makes the record due again, and after the file is
    overwritten `coord restore` puts the edits back."""
    repo = make_repo({"a.txt": "a\n", "note ": "n1\n"})
    ok(coord(repo, "assign", "A", "--title", "A", "--expect", "e", "--write", "a.txt",
             "--write", "note "))
    ok(worker(repo, "start", "A"))
    write(repo, "note ", "n1\nA's line\n")
    settled(repo, "note ")
    ok(worker(repo, "heartbeat", "A"))
    saved = _saved(repo, "A")
    assert "note " in saved.hunks or "note " in saved.whole
    assert (saved.hunks, saved.whole, saved.own) == _full_record(repo, "A")
    write(repo, "note ", "n1\nA's line\nand another\n")  # only this file: still due
    settled(repo, "note ")
    ok(worker(repo, "heartbeat", "A"))
    assert (_saved(repo, "A").hunks, _saved(repo, "A").whole) == _full_record(repo, "A")[:2]
    write(repo, "note ", "n1\n")
    assert ok(coord(repo, "restore", "A"))["restored"] == ["note "]
    assert (repo / "note ").read_text() == "n1\nA's line\nand another\n"
    hgit.close_readers()
