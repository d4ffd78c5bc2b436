"""Wedges a newcomer met: each one a dead end that no command got out of."""

from __future__ import annotations

from testing.cli import Cli, ok
from testing.repo import MakeRepo, git, write
from testing.wait import wait_until

S = "sess-20260101-0000-worker@m"
S2 = "sess-20260101-0001-worker@m"


def test_a_task_id_ending_in_dot_lock_works_end_to_end(coord: Cli, worker: Cli,
                                                        make_repo: MakeRepo) -> None:
    repo = make_repo({"a.txt": "a\n", "b.txt": "b\n"})
    ok(coord(repo, "assign", "t.lock", "--title", "T", "--expect", "E", "--write", "a.txt"))
    ok(worker(repo, "start", "t.lock", session=S))
    write(repo, "a.txt", "edited\n")
    ok(worker(repo, "heartbeat", "t.lock", session=S))  # records the work in progress
    r = worker(repo, "done", "t.lock", session=S)
    assert r.code == 0, r
    refs = git(repo, "for-each-ref", "--format=%(refname)", "refs/hunkwise/")
    assert "refs/hunkwise/snapshots/t.lock+/r1" in refs
    git(repo, "checkout", "--", "a.txt")  # something destroys the edit
    assert ok(coord(repo, "status"))["lost"][0]["task"] == "t.lock"
    ok(coord(repo, "restore", "t.lock"))
    assert (repo / "a.txt").read_text() == "edited\n"
    commit = ok(coord(repo, "accept", "t.lock"))["commit"]
    assert git(repo, "show", f"{commit}:a.txt") == "edited\n"


def test_a_handoff_of_a_dot_lock_task(coord: Cli, worker: Cli, make_repo: MakeRepo) -> None:
    repo = make_repo({"a.txt": "a\n"})
    ok(coord(repo, "assign", "x.lock", "--title", "T", "--expect", "E", "--write", "a.txt"))
    ok(worker(repo, "start", "x.lock", session=S))
    write(repo, "a.txt", "edited\n")
    ok(worker(repo, "handoff", "x.lock", "--to", S2, "--next", "finish it", session=S))
    ok(worker(repo, "start", "x.lock", session=S2))
    ok(worker(repo, "done", "x.lock", session=S2))
    ok(coord(repo, "accept", "x.lock"))


def test_a_file_under_no_grant_written_all_along_does_not_wedge_done(
        coord: Cli, worker: Cli, make_repo: MakeRepo) -> None:
    """Another worker's check writing its output into the tree (a log, a report file)
    over and over: the tree never stops changing there, and no task may commit it."""
    import subprocess
    import sys

    repo = make_repo({"a.txt": "a\n", ".gitignore": "stop\n"})
    ok(coord(repo, "assign", "t1", "--title", "T", "--expect", "E", "--write", "a.txt"))
    ok(worker(repo, "start", "t1", session=S))
    write(repo, "a.txt", "edited\n")
    writer = subprocess.Popen([sys.executable, "-c", (
        "import os, time\n"
        "while not os.path.exists('stop'):\n"
        "    with open('check-output.log', 'w') as f: f.write(str(time.time_ns()) * 50)\n")],
        cwd=repo)
    try:
        wait_until(lambda: (repo / "check-output.log").exists(), what="the writer writing")
        r = worker(repo, "done", "t1", session=S)
    finally:
        write(repo, "stop", "")
        writer.wait(timeout=60)
    assert r.code == 0, r
    assert r.doc["report"]["changes"] == 1
    ok(coord(repo, "accept", "t1"))
    assert git(repo, "show", "HEAD:a.txt") == "edited\n"
    assert "check-output.log" not in git(repo, "show", "--stat", "HEAD")



def _with_submodule(make_repo: MakeRepo) -> tuple:  # type: ignore[type-arg]
    inner = make_repo({"s.txt": "s\n"})
    repo = make_repo({"a.txt": "a\n"})
    git(repo, "-c", "protocol.file.allow=always", "submodule", "-q", "add", str(inner), "sub")
    git(repo, "commit", "-q", "-m", "sub")
    return repo, inner


def test_a_grant_inside_a_submodule_is_refused_with_the_reason(coord: Cli,
                                                                make_repo: MakeRepo) -> None:
    repo, _ = _with_submodule(make_repo)
    for grant in ("sub/", "sub/**", "sub/s.txt"):
        r = coord(repo, "assign", "t1", "--title", "T", "--expect", "E", "--write", grant)
        assert r.code == 2, (grant, r)
        msg = r.doc["error"]["message"]
        assert "sub is a git submodule" in msg and "grant sub (no slash)" in msg
    r = coord(repo, "assign", "t1", "--title", "T", "--expect", "E", "--write", "sub/s.txt:1")
    assert r.code == 2
    ok(coord(repo, "assign", "t1", "--title", "T", "--expect", "E", "--write", "sub"))


def test_edits_inside_a_submodule_are_reported_and_its_pointer_is_a_change(
        coord: Cli, worker: Cli, make_repo: MakeRepo) -> None:
    repo, _ = _with_submodule(make_repo)
    ok(coord(repo, "assign", "t1", "--title", "T", "--expect", "E", "--write", "sub"))
    ok(worker(repo, "start", "t1", session=S))
    write(repo, "sub/s.txt", "edited inside\n")
    write(repo, "sub/new.txt", "new inside\n")
    doc = ok(coord(repo, "status"))
    assert doc["submodules"] == [{"path": "sub", "modified": True, "untracked": True}]
    text = coord(repo, "status", json_out=False).stdout
    assert "submodule: sub holds modified files and untracked files inside it" in text
    # Committed inside the submodule: its pointer moves, and that is the task's change.
    git(repo / "sub", "add", "-A")
    git(repo / "sub", "-c", "user.name=A", "-c", "user.email=a@b", "commit", "-q", "-m", "in")
    assert ok(coord(repo, "status"))["submodules"] == []
    assert ok(worker(repo, "done", "t1", session=S))["report"]["changes"] == 1
    commit = ok(coord(repo, "accept", "t1"))["commit"]
    inner_head = git(repo / "sub", "rev-parse", "HEAD").strip()
    assert git(repo, "rev-parse", f"{commit}:sub").strip() == inner_head


def test_reject_discard_under_autocrlf_keeps_the_other_tasks_line_endings(
        coord: Cli, worker: Cli, make_repo: MakeRepo) -> None:
    repo = make_repo({"a.txt": "l1\nl2\nl3\nl4\n"})
    git(repo, "config", "core.autocrlf", "true")
    ok(coord(repo, "assign", "t1", "--title", "T", "--expect", "E", "--write", "a.txt:1-2"))
    ok(coord(repo, "assign", "t2", "--title", "T", "--expect", "E", "--write", "a.txt:3-4"))
    ok(worker(repo, "start", "t1", session=S))
    ok(worker(repo, "start", "t2", session=S2))
    write(repo, "a.txt", b"L1\nl2\nL3\nl4\n")  # both workers wrote LF lines
    ok(worker(repo, "done", "t1", session=S))
    ok(coord(repo, "reject", "t1", "--note", "no", "--discard"))
    lines = (repo / "a.txt").read_bytes().split(b"\n")
    assert lines[2] == b"L3"  # t2's line: untouched, still LF
    assert lines[1] == b"l2" and lines[3] == b"l4"
    assert lines[0] in (b"l1", b"l1\r")  # the discarded line: as a checkout writes it
    ok(worker(repo, "done", "t2", session=S2))
    commit = ok(coord(repo, "accept", "t2"))["commit"]
    assert git(repo, "show", f"{commit}:a.txt") == "l1\nl2\nL3\nl4\n"


def test_reject_discard_of_a_file_git_takes_for_binary_under_an_eol_attribute(
        coord: Cli, worker: Cli, make_repo: MakeRepo) -> None:
    """A NUL byte makes git print "Binary files differ": the discard still writes HEAD's
    content back (was: it silently kept the task's bytes, and said it had discarded)."""
    repo = make_repo({"a.dat": "l1\n\0l2\nl3\n", ".gitattributes": "*.dat text eol=crlf\n"})
    ok(coord(repo, "assign", "t1", "--title", "T", "--expect", "E", "--write", "a.dat"))
    ok(worker(repo, "start", "t1", session=S))
    write(repo, "a.dat", b"L1\r\n\0l2\r\nl3\r\n")
    ok(worker(repo, "done", "t1", session=S))
    ok(coord(repo, "reject", "t1", "--note", "no", "--discard"))
    assert (repo / "a.dat").read_bytes().replace(b"\r\n", b"\n") == b"l1\n\0l2\nl3\n"
    assert git(repo, "diff", "--stat") == ""


def test_a_file_whose_name_ends_in_a_space_can_be_granted(coord: Cli, worker: Cli,
                                                          make_repo: MakeRepo) -> None:
    repo = make_repo({"note ": "a\n", "note": "plain\n"})
    doc = ok(coord(repo, "assign", "t1", "--title", "T", "--expect", "E", "--write", "note "))
    assert doc["warnings"] == []
    # It holds that file, and not the one without the space.
    r = coord(repo, "assign", "t2", "--title", "T", "--expect", "E", "--write", "note :1")
    assert r.code == 3
    ok(coord(repo, "assign", "t3", "--title", "T", "--expect", "E", "--write", "note"))
    ok(worker(repo, "start", "t1", session=S))
    write(repo, "note ", "edited\n")
    done = ok(worker(repo, "done", "t1", session=S))
    assert done["report"]["changes"] == 1 and done["outside_grants"] == []
    commit = ok(coord(repo, "accept", "t1"))["commit"]
    assert git(repo, "show", f"{commit}:note ") == "edited\n"
    assert git(repo, "show", f"{commit}:note") == "plain\n"
