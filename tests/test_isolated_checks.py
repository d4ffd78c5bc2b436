"""A task's checks run on HEAD plus exactly its own changes, not amid the shared tree.

Task A's test calls `helper`, which task B is adding to `lib.sh`, uncommitted: in the shared
tree A's check passes only because of B's edit. Isolated, `worker done A` refuses and
`worker check A` says what the checkout lacked. And the reverse: B's half-typed syntax
error in `lib.sh` no longer fails A's checks.
"""

from __future__ import annotations

import pytest

from testing.cli import Cli, error_message, ok
from testing.generated import begin, scratch_left, session, worktrees
from testing.repo import MakeRepo, git, write

LIB = "base() { echo base; }\n"
A_TEST = "#!/bin/sh\n. ./lib.sh\nbase\n"
A_CHECK = "sh a_test.sh"


def two_tasks(make_repo: MakeRepo, coord: Cli, worker: Cli, where: str | None = None):  # type: ignore[no-untyped-def]
    files: dict[str, str | bytes] = {"lib.sh": LIB, "a_test.sh": A_TEST}
    if where:
        files["coord.toml"] = f'[checks]\nwhere = "{where}"\n'
    repo = make_repo(files)
    begin(coord, worker, repo, "A", "a_test.sh", checks=(A_CHECK,))
    begin(coord, worker, repo, "B", "lib.sh", checks=("sh -n lib.sh",))
    return repo


def test_a_check_that_passes_only_through_another_tasks_edit_is_refused(
        make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
    repo = two_tasks(make_repo, coord, worker)
    write(repo, "lib.sh", LIB + "helper() { echo helping; }\n")  # B's, uncommitted
    write(repo, "a_test.sh", A_TEST + "helper\n")                 # A's: needs B's helper
    assert git(repo, "-c", "core.quotepath=off", "status", "--porcelain").count("M") == 2
    r = worker(repo, "done", "A", session=session("A"))
    assert r.code == 1
    assert "check failed on HEAD + exactly the task's changes" in error_message(r)
    assert "helper" in r.doc["error"]["details"]          # the shell's "not found"
    assert "lib.sh (task B)" in r.doc["error"]["details"]  # what the checkout lacked
    assert list((repo / ".git/coord/inbox/new").iterdir()) == []
    c = worker(repo, "check", "A")
    assert c.code == 1
    doc = c.doc
    assert doc["where"] == "isolated" and doc["passed"] is False
    assert {"path": "lib.sh", "whose": "task B"} in doc["left_out"]
    assert "helper" in doc["checks"][0]["output_tail"]
    text = worker(repo, "check", "A", json_out=False)
    assert text.code == 1
    assert "not in that checkout (the shared tree has them, uncommitted):" in text.stdout
    assert "  lib.sh (task B)" in text.stdout
    assert text.stdout.rstrip().endswith("A: checks FAILED (isolated)")
    # worker check delivers nothing and changes no state.
    assert ok(coord(repo, "status"))["tasks"][0]["state"] == "in_progress"
    assert len(worktrees(repo)) == 1 and scratch_left(repo) == []


def test_in_the_shared_tree_the_same_check_passes(make_repo: MakeRepo, coord: Cli,
                                                  worker: Cli) -> None:
    repo = two_tasks(make_repo, coord, worker, where="tree")
    write(repo, "lib.sh", LIB + "helper() { echo helping; }\n")
    write(repo, "a_test.sh", A_TEST + "helper\n")
    ok(worker(repo, "done", "A", session=session("A")))


def test_another_tasks_syntax_error_in_the_shared_tree_no_longer_fails_a_check(
        make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
    repo = two_tasks(make_repo, coord, worker)
    write(repo, "lib.sh", LIB + "broken() { echo 'half typed\n")  # B mid-edit
    write(repo, "a_test.sh", A_TEST + "echo A-addition\n")
    doc = ok(worker(repo, "check", "A"))
    assert doc["passed"] is True
    assert "A-addition" in doc["checks"][0]["output_tail"]
    ok(worker(repo, "done", "A", session=session("A")))
    report = ok(coord(repo, "next"))["next"]["report"]
    assert report["checks_where"] == "isolated"
    assert [c["passed"] for c in report["checks"]] == [True]
    # B's own check still sees B's syntax error, isolated or not.
    r = worker(repo, "done", "B", session=session("B"))
    assert r.code == 1 and "sh -n lib.sh" in error_message(r)


def test_the_same_syntax_error_fails_a_check_run_in_the_tree(make_repo: MakeRepo, coord: Cli,
                                                             worker: Cli) -> None:
    repo = two_tasks(make_repo, coord, worker, where="tree")
    write(repo, "lib.sh", LIB + "broken() { echo 'half typed\n")
    write(repo, "a_test.sh", A_TEST + "echo A-addition\n")
    assert worker(repo, "done", "A", session=session("A")).code == 1


def test_isolated_checks_see_exactly_the_tasks_ranges_of_a_shared_file(
        make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
    """Two tasks on line ranges of one file: A's checkout holds A's line and not B's."""
    repo = make_repo({"f.txt": "".join(f"line {i}\n" for i in range(1, 11))})
    check = "grep -qx 'two by A' f.txt && ! grep -q 'by B' f.txt"
    begin(coord, worker, repo, "A", "f.txt:1-5", checks=(check,))
    begin(coord, worker, repo, "B", "f.txt:6-10")
    rows = (repo / "f.txt").read_text().split("\n")
    rows[1], rows[8] = "two by A", "nine by B"
    (repo / "f.txt").write_text("\n".join(rows))
    ok(worker(repo, "done", "A", session=session("A")))


def test_checks_stream_while_they_run_and_stdout_stays_one_document(
        make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
    repo = make_repo({"f.txt": "x\n"})
    begin(coord, worker, repo, "A", "f.txt", checks=("echo progress-line-1; echo progress-line-2",))
    write(repo, "f.txt", "y\n")
    r = worker(repo, "done", "A", session=session("A"))
    assert r.code == 0
    assert "progress-line-1" in r.stderr and "progress-line-2" in r.stderr
    assert ok(r)["report"]["checks_passed"] == 1  # stdout: one JSON document, the result


@pytest.mark.parametrize("state", ["accepted", "rejected"])
def test_worker_check_of_a_finished_task_is_refused(make_repo: MakeRepo, coord: Cli,
                                                    worker: Cli, state: str) -> None:
    repo = make_repo({"f.txt": "x\n"})
    begin(coord, worker, repo, "A", "f.txt", checks=("true",))
    write(repo, "f.txt", "y\n")
    ok(worker(repo, "done", "A", session=session("A")))
    if state == "accepted":
        ok(coord(repo, "accept", "A"))
    else:
        ok(coord(repo, "reject", "A", "--note", "no"))
    r = worker(repo, "check", "A")
    assert r.code == 3 and "nothing is left to check" in error_message(r)
    assert worker(repo, "check", "nope").code == 2


def test_a_done_with_nothing_to_deliver_is_refused_before_any_check_runs(
        make_repo: MakeRepo, coord: Cli, worker: Cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    ran = tmp_path / "ran"
    repo = make_repo({"a.txt": "a\n"})
    begin(coord, worker, repo, "A", "a.txt", checks=(f"touch {ran}",))
    r = worker(repo, "done", "A", session=session("A"))
    assert r.code == 1 and "no changes in your grants" in error_message(r)
    assert not ran.exists()  # no checkout set up, no check run, for a refusal
    assert scratch_left(repo) == []
