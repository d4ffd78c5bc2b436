"""A worker's `git add` is named at its own next command and by `coord status`, every path."""

from __future__ import annotations

from testing.cli import Cli, error_message, ok
from testing.repo import MakeRepo, git, write

S = "sess-20260101-0000-worker@m"


def test_a_staged_rename_is_named_at_the_workers_next_command(coord: Cli, worker: Cli,
                                                              make_repo: MakeRepo) -> None:
    repo = make_repo({"old_name.py": "x = 1\n", "b.txt": "b\n"})
    ok(coord(repo, "assign", "t1", "--title", "T", "--expect", "E", "--write", "*.py"))
    ok(worker(repo, "start", "t1", session=S))
    git(repo, "mv", "old_name.py", "new_name.py")  # stages both sides of the rename
    r = worker(repo, "heartbeat", "t1", session=S)
    assert r.code == 0, r
    assert r.doc["task"] == "t1"  # stdout still one JSON document
    warning = next(line for line in r.stderr.split("\n") if "staged in the index" in line)
    assert "old_name.py" in warning and "new_name.py" in warning
    assert "git restore --staged" in warning
    # coord status names both too.
    text = coord(repo, "status", json_out=False).stdout
    line = next(x for x in text.split("\n") if x.startswith("index:"))
    assert "old_name.py" in line and "new_name.py" in line
    assert sorted(ok(coord(repo, "status"))["staged"]) == ["new_name.py", "old_name.py"]


def test_accept_names_every_staged_path(coord: Cli, worker: Cli, make_repo: MakeRepo) -> None:
    repo = make_repo({"a.txt": "a\n", "old.txt": "o\n"})
    ok(coord(repo, "assign", "t1", "--title", "T", "--expect", "E", "--write", "a.txt"))
    ok(worker(repo, "start", "t1", session=S))
    write(repo, "a.txt", "edited\n")
    ok(worker(repo, "done", "t1", session=S))
    git(repo, "mv", "old.txt", "renamed.txt")
    r = coord(repo, "accept", "t1")
    assert r.code == 1
    msg = error_message(r)
    assert "old.txt" in msg and "renamed.txt" in msg


def test_no_warning_with_a_clean_index(coord: Cli, worker: Cli, make_repo: MakeRepo) -> None:
    repo = make_repo({"a.txt": "a\n"})
    ok(coord(repo, "assign", "t1", "--title", "T", "--expect", "E", "--write", "a.txt"))
    r = worker(repo, "start", "t1", session=S)
    assert r.code == 0 and "staged" not in r.stderr


def test_a_clean_index_is_remembered_and_every_stage_after_it_still_named(
        coord: Cli, worker: Cli, make_repo: MakeRepo) -> None:
    """An index found clean is not read again while it and HEAD stay as they were (a
    10 MB index at 100,000 files); a `git add`, a commit or a `git restore --staged` after
    it is seen at once, even within the same second."""
    import os

    from hunkwise.shared import git as hw_git

    repo = make_repo({"a.txt": "a\n", "b.txt": "b\n"})
    ok(coord(repo, "assign", "t1", "--title", "T", "--expect", "E", "--write", "a.txt"))
    ok(worker(repo, "start", "t1", session=S))
    assert hw_git.index_dirty(repo, remembered=True) == []
    stamp = repo / ".git" / "hunkwise" / "index-clean"
    assert stamp.exists()
    calls: list[tuple[str, ...]] = []
    real = hw_git.run
    hw_git.run = lambda r, *a, **k: (calls.append(a), real(r, *a, **k))[1]  # type: ignore[assignment]
    try:
        assert hw_git.index_dirty(repo, remembered=True) == []
        assert not any(a[0] == "diff-index" for a in calls)  # remembered: not read again
    finally:
        hw_git.run = real  # type: ignore[assignment]
    before = os.stat(repo / ".git" / "index").st_mtime_ns
    write(repo, "b.txt", "B\n")
    git(repo, "add", "b.txt")
    os.utime(repo / ".git" / "index", ns=(before, before))  # the same time: still seen
    r = worker(repo, "heartbeat", "t1", session=S)
    assert "staged in the index: b.txt" in r.stderr
    assert ok(coord(repo, "status"))["staged"] == ["b.txt"]
    git(repo, "restore", "--staged", "b.txt")
    assert "staged" not in worker(repo, "heartbeat", "t1", session=S).stderr
    # The gate never trusts the memory: accept reads the index itself.
    git(repo, "add", "b.txt")
    stamp.write_text(stamp.read_text())  # (a forged stamp would say nothing to it)
    assert hw_git.index_dirty(repo) == ["b.txt"]
