"""coord revert: the exact inverse of a task's accepted commit, or a clear refusal."""

from __future__ import annotations

from pathlib import Path

from testing.cli import assign_and_start
from testing.repo import git, git_bytes, numbered, set_line, write


def _accept(coord, worker, repo: Path, tid: str, grant: str, edit) -> str:
    assert coord(repo, "assign", tid, "--title", f"{tid} title", "--expect", "e",
                 "--write", grant).code == 0
    assert worker(repo, "start", tid).code == 0
    edit()
    r = worker(repo, "done", tid, "--commit-message", f"{tid} change")
    assert r.code == 0, r.stderr
    r = coord(repo, "accept", tid)
    assert r.code == 0, r.stderr
    return r.doc["commit"]


def test_revert_commits_the_exact_inverse_and_keeps_later_work(make_repo, coord, worker) -> None:
    repo = make_repo({"f.txt": numbered(20), "g.bin": b"\x00\x01old"})
    before = git_bytes(repo, "show", "HEAD:f.txt")
    _accept(coord, worker, repo, "t1", "f.txt:1-10", lambda: set_line(repo, "f.txt", 3, "three"))
    # A later task changes other lines of the same file.
    _accept(coord, worker, repo, "t2", "f.txt:11-20", lambda: set_line(repo, "f.txt", 15, "fifteen"))
    r = coord(repo, "revert", "t1")
    assert r.code == 0, r.stderr
    head = git(repo, "rev-parse", "HEAD").strip()
    assert r.doc["commit"] == head
    expected = before.replace(b"line 15\n", b"fifteen\n")
    assert git_bytes(repo, "show", "HEAD:f.txt") == expected
    msg = git(repo, "log", "-1", "--format=%B")
    assert msg.startswith('Revert "t1 change"') and "Coord-Task: t1" in msg
    # The tree follows (nobody had edited f.txt since) and nothing is left staged.
    assert (repo / "f.txt").read_bytes() == expected
    assert git(repo, "status", "--porcelain") == ""


def test_revert_of_whole_file_changes(make_repo, coord, worker) -> None:
    repo = make_repo({"keep.txt": "k\n", "gone.txt": "bye\n"})

    def edit() -> None:
        write(repo, "new/added.txt", "hello\n")
        (repo / "gone.txt").unlink()
        (repo / "keep.txt").chmod(0o755)

    _accept(coord, worker, repo, "t1", "**", edit)
    assert coord(repo, "revert", "t1").code == 0
    tree = git(repo, "ls-tree", "-r", "HEAD")
    assert "new/added.txt" not in tree and "gone.txt" in tree
    assert "100644 blob" in next(line for line in tree.splitlines() if line.endswith("keep.txt"))
    assert git_bytes(repo, "show", "HEAD:gone.txt") == b"bye\n"


def test_revert_refuses_when_later_commits_changed_the_same_lines(make_repo, coord, worker) -> None:
    repo = make_repo({"f.txt": numbered(10)})
    _accept(coord, worker, repo, "t1", "f.txt:1-10", lambda: set_line(repo, "f.txt", 3, "three"))
    _accept(coord, worker, repo, "t2", "f.txt:1-10", lambda: set_line(repo, "f.txt", 3, "THREE"))
    head = git(repo, "rev-parse", "HEAD").strip()
    r = coord(repo, "revert", "t1")
    assert r.code == 3
    assert "f.txt" in r.doc["error"]["message"] and "lines 3-3" in r.doc["error"]["message"]
    assert git(repo, "rev-parse", "HEAD").strip() == head


def test_revert_refuses_unaccepted_and_keeps_uncommitted_edits(make_repo, coord, worker) -> None:
    repo = make_repo({"f.txt": numbered(10), "g.txt": numbered(10)})
    _accept(coord, worker, repo, "t1", "f.txt:1-5", lambda: set_line(repo, "f.txt", 2, "two"))
    assert coord(repo, "assign", "t2", "--title", "x", "--expect", "e", "--write", "g.txt").code == 0
    assert coord(repo, "revert", "t2").code == 3          # not accepted
    assert coord(repo, "revert", "nope").code == 2        # unknown
    set_line(repo, "f.txt", 9, "someone's uncommitted nine")
    r = coord(repo, "revert", "t1")
    assert r.code == 0 and r.doc["tree_left"] == []
    # The revert reaches the tree around the uncommitted edit, which survives untouched.
    assert git_bytes(repo, "show", "HEAD:f.txt") == numbered(10).encode()
    assert (repo / "f.txt").read_bytes() == numbered(10).replace(
        "line 9\n", "someone's uncommitted nine\n").encode()


def test_revert_leaves_a_file_whose_uncommitted_edit_touches_the_same_lines(make_repo, coord,
                                                                           worker) -> None:
    repo = make_repo({"f.txt": numbered(10)})
    _accept(coord, worker, repo, "t1", "f.txt:1-5", lambda: set_line(repo, "f.txt", 2, "two"))
    set_line(repo, "f.txt", 2, "two, edited again")
    r = coord(repo, "revert", "t1")
    assert r.code == 0 and r.doc["tree_left"] == ["f.txt"]
    assert b"two, edited again" in (repo / "f.txt").read_bytes()


def test_a_reverted_task_is_reverted_and_a_second_revert_names_the_first(make_repo, coord,
                                                                         worker) -> None:
    repo = make_repo({"f.txt": numbered(10)})
    _accept(coord, worker, repo, "t1", "f.txt:1-5", lambda: set_line(repo, "f.txt", 2, "two"))
    r = coord(repo, "revert", "t1")
    assert r.code == 0, r.stderr
    first = r.doc["commit"]
    assert r.doc["state"] == "reverted"
    tasks = {t["id"]: t for t in coord(repo, "status").doc["tasks"]}
    assert tasks["t1"]["state"] == "reverted"
    head = git(repo, "rev-parse", "HEAD").strip()
    again = coord(repo, "revert", "t1")
    assert again.code == 3
    assert f"already reverted by {first[:12]}" in again.doc["error"]["message"]
    assert git(repo, "rev-parse", "HEAD").strip() == head
    # Inactive like accepted: its range is free for a new task.
    assert coord(repo, "assign", "t2", "--title", "x", "--expect", "e",
                 "--write", "f.txt:1-5").code == 0


def test_revert_of_a_task_archived_at_thaw(make_repo, coord, worker) -> None:
    repo = make_repo({"f.txt": numbered(10)})
    _accept(coord, worker, repo, "t1", "f.txt:1-5", lambda: set_line(repo, "f.txt", 2, "two"))
    assert coord(repo, "freeze").code == 0
    assert coord(repo, "thaw").code == 0
    assert "t1" not in {t["id"] for t in coord(repo, "status").doc["tasks"]}
    r = coord(repo, "revert", "t1")
    assert r.code == 0, r.stderr
    assert git_bytes(repo, "show", "HEAD:f.txt") == numbered(10).encode()
    assert coord(repo, "revert", "t1").code == 3
    listed = {t["id"]: t for t in coord(repo, "status", "--all").doc["tasks"]}
    assert listed["t1"]["state"] == "reverted"


def test_revert_puts_a_deleted_line_after_a_later_replacement(make_repo, coord, worker) -> None:
    repo = make_repo({"f.txt": numbered(10)})
    f = repo / "f.txt"
    assign_and_start(coord, worker, repo, "A", "f.txt:6-8",
          lambda: f.write_text(f.read_text().replace("line 6\n", "")))
    assert worker(repo, "done", "A").code == 0 and coord(repo, "accept", "A").code == 0
    assign_and_start(coord, worker, repo, "B", "f.txt:1-5",
          lambda: f.write_text(f.read_text().replace("line 5\n", "X\nY\nZ\n")))
    assert worker(repo, "done", "B").code == 0 and coord(repo, "accept", "B").code == 0
    r = coord(repo, "revert", "A")
    assert r.code == 0, r.stderr
    want = numbered(10).replace("line 5\n", "X\nY\nZ\n").encode()
    assert git_bytes(repo, "show", "HEAD:f.txt") == want
    assert f.read_bytes() == want
