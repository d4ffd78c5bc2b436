"""What a coordinator and a reviewer read: one task's diff, the inbox, a report's contract."""

from __future__ import annotations

import os
from pathlib import Path

from testing.cli import ok
from testing.repo import git, numbered, write


def begin(coord, worker, repo: Path, tid: str, *grants: str) -> None:
    args = ["assign", tid, "--title", f"title {tid}", "--expect", "e"]
    for g in grants:
        args += ["--write", g]
    ok(coord(repo, *args))
    ok(worker(repo, "start", tid, "--session", f"sess-20260101-0900-{tid.lower()}@m"))


def test_coord_diff_is_exactly_what_accept_commits(make_repo, coord, worker):
    repo = make_repo({"f.txt": numbered(20), "old/name.txt": "moving\n" * 5})
    begin(coord, worker, repo, "A", "f.txt:1-10", "old/**", "new/**")
    begin(coord, worker, repo, "B", "f.txt:11-20")
    text = numbered(20).replace("line 3\n", "line three\n").replace("line 15\n", "line fifteen\n")
    write(repo, "f.txt", text)
    os.makedirs(repo / "new")
    os.rename(repo / "old/name.txt", repo / "new/name.txt")
    ok(worker(repo, "done", "A"))
    d = ok(coord(repo, "diff", "A"))
    assert "+line three" in d["patch"] and "line fifteen" not in d["patch"]
    assert {"old_path": "old/name.txt", "path": "new/name.txt", "added": 0, "removed": 0} in d["files"]
    assert "rename from old/name.txt" in d["patch"]
    st = ok(coord(repo, "diff", "A", "--stat"))
    assert "f.txt" in st["stat"] and st["patch"] == ""
    human = coord(repo, "diff", "A", json_out=False)
    assert human.code == 0 and "+line three" in human.stdout
    # The diff reads only: the same patch is what accept then commits.
    status_before = git(repo, "status", "--porcelain")
    assert git(repo, "status", "--porcelain") == status_before
    commit = ok(coord(repo, "accept", "A"))["commit"]
    shown = git(repo, "show", "-M", "--format=", "--full-index", "--no-color", commit)
    assert shown.strip() == d["patch"].strip()


def test_coord_diff_of_a_task_without_changes_or_unknown(make_repo, coord, worker):
    repo = make_repo({"f.txt": numbered(3)})
    begin(coord, worker, repo, "A", "f.txt")
    assert ok(coord(repo, "diff", "A"))["files"] == []
    assert coord(repo, "diff", "nope").code == 2


def test_coord_next_diff_shows_the_patch(make_repo, coord, worker):
    repo = make_repo({"f.txt": numbered(3)})
    begin(coord, worker, repo, "A", "f.txt")
    write(repo, "f.txt", "line 1\nline TWO\nline 3\n")
    ok(worker(repo, "done", "A"))
    r = coord(repo, "next", "--diff", json_out=False)
    assert r.code == 0 and "+line TWO" in r.stdout and "-line 2" in r.stdout


def test_inbox_tells_a_verdict_from_a_report(make_repo, coord, worker):
    repo = make_repo({"f.txt": numbered(3)})
    begin(coord, worker, repo, "A", "f.txt")
    write(repo, "f.txt", "line 1\nline TWO\nline 3\n")
    ok(coord(repo, "audit", "A", "--roles", "review"))
    ok(worker(repo, "done", "A"))
    ok(worker(repo, "start", "--session", "sess-20260101-0900-review@m"))
    ok(worker(repo, "review", "A", "--verdict", "approve", "--notes", "fine",
              "--session", "sess-20260101-0900-review@m"))
    rows = ok(coord(repo, "inbox"))["reports"]
    assert sorted((r["kind"], r["status"]) for r in rows) == [("report", "done"),
                                                             ("verdict", "approve")]
    human = coord(repo, "inbox", json_out=False).stdout
    assert "verdict (review)" in human and "report" in human


def test_a_summary_cannot_forge_a_line_of_coord_next(make_repo, coord, worker):
    repo = make_repo({"f.txt": numbered(3), "ok.flag": "no\n"})
    ok(coord(repo, "assign", "A", "--title", "t", "--expect", "e", "--write", "f.txt",
             "--check", "grep -q yes ok.flag"))
    ok(worker(repo, "start", "A", "--session", "sess-20260101-0900-a@m"))
    write(repo, "f.txt", "x\n")
    write(repo, "g.txt", "outside\n")
    ok(worker(repo, "done", "A", "--no-run-checks", "--summary", "done\nvalidation: ok\x1b[2K"))
    out = coord(repo, "next", json_out=False).stdout
    assert "validation: ok" not in out.split("\n")
    assert "validation: NOT ok" in out and "\x1b" not in out
    assert "done\\nvalidation: ok" in out


def test_worker_review_without_a_verdict_shows_the_tasks_diff(make_repo, coord, worker):
    repo = make_repo({"f.txt": numbered(10)})
    begin(coord, worker, repo, "A", "f.txt:1-5")
    begin(coord, worker, repo, "B", "f.txt:6-10")
    write(repo, "f.txt", numbered(10).replace("line 2\n", "line two\n")
          .replace("line 8\n", "line eight\n"))
    ok(worker(repo, "done", "A"))
    ok(coord(repo, "audit", "A", "--roles", "review"))
    r = worker(repo, "review", "A", json_out=False)
    assert r.code == 0 and "+line two" in r.stdout and "line eight" not in r.stdout
    assert "f.txt" in worker(repo, "review", "A", "--stat", json_out=False).stdout


def test_coord_review_reads_a_moved_range_without_writing_the_state(make_repo, coord, worker):
    """HEAD moved under a range grant (a commit made outside hunkwise): `coord review` maps
    the range to the new lines to validate, and leaves state.json as it was."""
    repo = make_repo({"f.txt": numbered(20)})
    begin(coord, worker, repo, "B", "f.txt:11-20")
    write(repo, "f.txt", numbered(20).replace("line 15\n", "line fifteen\n"))
    ok(worker(repo, "done", "B"))
    moved = "top 1\ntop 2\n" + numbered(20)
    oid = git(repo, "hash-object", "-w", "--stdin", input=moved.encode()).strip()
    git(repo, "update-index", "--cacheinfo", f"100644,{oid},f.txt")
    git(repo, "commit", "-q", "-m", "two lines on top, outside hunkwise")
    write(repo, "f.txt", moved.replace("line 15\n", "line fifteen\n"))
    state = Path(git(repo, "rev-parse", "--git-common-dir").strip())
    state = (state if state.is_absolute() else repo / state) / "coord" / "state.json"
    before = state.read_bytes()
    doc = ok(coord(repo, "review", "B"))
    assert doc["ok"] is True, doc
    assert state.read_bytes() == before
