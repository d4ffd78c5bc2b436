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
