"""Scratch checkouts that a real suite runs in: `[checkout] setup`, `carry`, `link`, reuse.

The generated project's suite needs `build/version.txt`, an ignored file the main tree has
and a fresh checkout lacks: verify, the accept recheck and isolated worker checks pass with
setup or carry, and fail naming the file without them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testing.cli import Cli, error_message, ok
from testing.generated import (
    begin,
    generated_project,
    scratch_left,
    session,
    state_task,
    toml,
    worktrees,
)
from testing.repo import MakeRepo, git, write

VARIANTS = {
    "setup": {"setup": ["sh gen.sh"]},
    "carry": {"carry": ["build"]},
    "link": {"link": ["build"]},
    "none": {},
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_verify_runs_the_suite_with_setup_or_carry_and_names_the_missing_file_without(
        make_repo: MakeRepo, coord: Cli, variant: str) -> None:
    repo = generated_project(make_repo, toml(**VARIANTS[variant]))
    ok(coord(repo, "freeze"))
    r = coord(repo, "verify")
    if variant == "none":
        assert r.code == 1
        assert "missing generated file build/version.txt" in r.doc["commands"][0]["output_tail"]
    else:
        assert r.code == 0, r.stdout + r.stderr
        assert r.doc["ok"] is True
    # Only a setup is worth a cached checkout (kept under the state); others are removed.
    cached = [w for w in worktrees(repo)[1:] if w.endswith("/.git/coord/checkouts/0/tree")]
    assert len(worktrees(repo)) == 1 + len(cached) == 1 + (variant == "setup")
    assert scratch_left(repo) == []
    assert git(repo, "status", "--porcelain") == ""


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_the_accept_recheck_runs_with_setup_or_carry_is_printed_and_kept(
        make_repo: MakeRepo, coord: Cli, worker: Cli, variant: str) -> None:
    repo = generated_project(make_repo, toml(**VARIANTS[variant]))
    begin(coord, worker, repo, "A", "src.txt", checks=("sh suite.sh", "true"))
    write(repo, "src.txt", "one\nTWO\n")
    ok(worker(repo, "done", "A", "--no-run-checks", session=session("A")))
    head = git(repo, "rev-parse", "HEAD").strip()
    r = coord(repo, "accept", "A", "--recheck")
    kept = state_task(repo, "A")["recheck"]
    if variant == "none":
        assert r.code == 1
        assert "'sh suite.sh' (exit 1)" in error_message(r)
        assert "missing generated file build/version.txt" in r.doc["error"]["details"]
        assert git(repo, "rev-parse", "HEAD").strip() == head
        assert kept["passed"] is False
        assert [c["passed"] for c in kept["checks"]] == [False, True]
        return
    doc = ok(r)
    assert doc["recheck"]["ran"] is True
    assert [(c["command"], c["passed"]) for c in doc["recheck"]["checks"]] == [
        ("sh suite.sh", True), ("true", True)]
    assert kept["passed"] is True and kept["commit"] == doc["commit"]
    assert len(kept["checks"]) == 2
    # The human form prints one line per check, then the commit.
    begin(coord, worker, repo, "B", "src.txt", checks=("sh suite.sh",))
    write(repo, "src.txt", "one\nTWO\nthree\n")
    ok(worker(repo, "done", "B", "--no-run-checks", session=session("B")))
    text = coord(repo, "accept", "B", "--recheck", json_out=False)
    assert text.code == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].startswith("recheck pass") and lines[0].endswith("sh suite.sh")
    assert "B: " in lines[1]


def test_an_accept_without_recheck_says_it_ran_none(make_repo: MakeRepo, coord: Cli,
                                                    worker: Cli) -> None:
    repo = generated_project(make_repo, toml(setup=["sh gen.sh"]))
    begin(coord, worker, repo, "A", "src.txt")
    write(repo, "src.txt", "x\n")
    ok(worker(repo, "done", "A", session=session("A")))
    doc = ok(coord(repo, "accept", "A"))
    assert doc["recheck"] == {"ran": False, "checks": []}
    assert "recheck" not in state_task(repo, "A")


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_isolated_worker_checks_run_with_setup_or_carry(
        make_repo: MakeRepo, coord: Cli, worker: Cli, variant: str) -> None:
    repo = generated_project(make_repo, toml(**VARIANTS[variant]))
    begin(coord, worker, repo, "A", "src.txt", checks=("sh suite.sh",))
    write(repo, "src.txt", "one\nTWO\n")
    r = worker(repo, "done", "A", session=session("A"))
    if variant == "none":
        assert r.code == 1
        assert "on HEAD + exactly the task's changes" in error_message(r)
        assert "missing generated file build/version.txt" in r.doc["error"]["details"]
        assert list((repo / ".git/coord/inbox/new").iterdir()) == []
        return
    ok(r)
    report = ok(coord(repo, "next"))["next"]["report"]
    assert report["checks_where"] == "isolated"
    assert report["checks"][0]["passed"] is True


def test_setup_runs_once_while_its_inputs_are_unchanged_and_again_when_they_change(
        make_repo: MakeRepo, coord: Cli, worker: Cli, tmp_path: Path) -> None:
    log = tmp_path / "setup.log"
    repo = generated_project(make_repo, toml(setup=[f"echo ran >> {log}", "sh gen.sh"]),
                             {"pyproject.toml": "[project]\nname = 'p'\n"})
    begin(coord, worker, repo, "A", "src.txt", checks=("sh suite.sh",))
    begin(coord, worker, repo, "B", "pyproject.toml", checks=("sh suite.sh",))
    write(repo, "src.txt", "changed\n")
    for _ in range(3):
        ok(worker(repo, "check", "A"))
    assert log.read_text() == "ran\n"  # one setup, then the cached checkout reset
    write(repo, "pyproject.toml", "[project]\nname = 'q'\n")
    ok(worker(repo, "check", "B"))  # HEAD + B's change: another input
    assert log.read_text() == "ran\nran\n"
    ok(worker(repo, "check", "A"))  # back to HEAD's input
    assert log.read_text().count("ran") == 3
    # The cached checkout holds no trace of the other task's change: A's, on HEAD.
    slot = repo / ".git" / "coord" / "checkouts" / "0" / "tree"
    assert (slot / "pyproject.toml").read_text() == "[project]\nname = 'p'\n"
    assert (slot / "src.txt").read_text() == "changed\n"


def test_a_reused_checkout_drops_what_the_last_run_left_and_keeps_the_setups_outputs(
        make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
    repo = generated_project(make_repo, toml(setup=["sh gen.sh", "echo made > made.txt"]))
    begin(coord, worker, repo, "A", "new.txt", checks=("test -f made.txt", "! test -f stray"))
    write(repo, "new.txt", "A's new file\n")
    ok(worker(repo, "check", "A"))
    # A check that leaves a file behind, and a task's new file: gone at the next reset.
    slot = repo / ".git" / "coord" / "checkouts" / "0" / "tree"
    (slot / "stray").write_text("left by a check\n")
    (repo / "new.txt").unlink()
    doc = ok(worker(repo, "check", "A"))
    assert doc["passed"] is True
    assert not (slot / "new.txt").exists()


def test_linked_paths_are_symlinks_and_carried_paths_copies(make_repo: MakeRepo, coord: Cli,
                                                            worker: Cli) -> None:
    repo = generated_project(make_repo, toml(carry=["build"], link=["node_modules"]))
    write(repo, "node_modules/pkg/index.js", "x\n")
    begin(coord, worker, repo, "A", "src.txt",
          checks=("test -L node_modules && test -f node_modules/pkg/index.js",
                  "test -d build && ! test -L build"))
    write(repo, "src.txt", "y\n")
    ok(worker(repo, "done", "A", session=session("A")))


def test_checks_where_tree_keeps_the_shared_tree_run(make_repo: MakeRepo, coord: Cli,
                                                     worker: Cli) -> None:
    repo = generated_project(make_repo, toml(extra='[checks]\nwhere = "tree"\n'))
    begin(coord, worker, repo, "A", "src.txt", checks=("sh suite.sh",))
    write(repo, "src.txt", "z\n")
    ok(worker(repo, "done", "A", session=session("A")))  # the main tree has build/
    report = ok(coord(repo, "next"))["next"]["report"]
    assert report["checks_where"] == "tree"
    assert len(worktrees(repo)) == 1


# ---- bad input --------------------------------------------------------------------------------

def test_a_failing_setup_stops_the_run_with_its_output_tail(make_repo: MakeRepo, coord: Cli,
                                                            worker: Cli) -> None:
    setup = ["echo installing; echo 'E: no such package foo' >&2; exit 3", "touch never"]
    repo = generated_project(make_repo, toml(setup=setup))
    begin(coord, worker, repo, "A", "src.txt", checks=("sh suite.sh",))
    write(repo, "src.txt", "w\n")
    r = worker(repo, "done", "A", session=session("A"))
    assert r.code == 1
    assert error_message(r).startswith("setup command")
    assert "(exit 3)" in error_message(r)
    assert "E: no such package foo" in r.doc["error"]["details"]
    assert "[setup 1/2" in r.stderr  # streamed as it ran
    v = coord(repo, "verify", "--dry")
    assert v.code == 1
    assert v.doc["commands"] == [] and v.doc["problems"][0].startswith("setup: ")
    assert "E: no such package foo" in v.doc["setup"]["output_tail"]
    # The slot was not marked ready: the next run sets up again, and fails again.
    assert worker(repo, "check", "A").code == 1


def test_a_carried_path_that_does_not_exist_is_a_usage_error_naming_it(
        make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
    repo = generated_project(make_repo, toml(carry=["build", "toolz.egg-info"]))
    r = coord(repo, "verify", "--dry")
    assert r.code == 2
    assert "toolz.egg-info" in error_message(r) and "does not exist" in error_message(r)
    begin(coord, worker, repo, "A", "src.txt", checks=("true",))
    write(repo, "src.txt", "v\n")
    r = worker(repo, "done", "A", session=session("A"))
    assert r.code == 2 and "toolz.egg-info" in error_message(r)


def test_a_tracked_path_cannot_be_carried(make_repo: MakeRepo, coord: Cli) -> None:
    repo = generated_project(make_repo, toml(carry=["src.txt"]))
    r = coord(repo, "verify", "--dry")
    assert r.code == 2 and "src.txt is tracked" in error_message(r)


@pytest.mark.parametrize("text, key", [
    ('[checkout]\nsetup = "pip install -e ."\n', "checkout.setup"),
    ("[checkout]\ncarry = [1]\n", "checkout.carry"),
    ('[checkout]\nlink = ["../outside"]\n', "checkout.link"),
    ('[checks]\nwhere = "elsewhere"\n', "checks.where"),
    ('[verify]\nbisect = "yes"\n', "verify.bisect"),
    ('[checkout]\nreuse = 1\n', "checkout.reuse"),
])
def test_a_wrong_setting_is_a_usage_error_naming_the_key(make_repo: MakeRepo, coord: Cli,
                                                         text: str, key: str) -> None:
    repo = make_repo({"coord.toml": text})
    r = coord(repo, "verify", "--dry")
    assert r.code == 2
    assert f"[{key}" in error_message(r)


def test_a_checkout_that_cannot_be_made_is_reported_in_one_line(make_repo: MakeRepo,
                                                                coord: Cli) -> None:
    repo = make_repo({"coord.toml": toml(verify=["true"])})
    # A commit whose tree holds a name longer than the file system allows (255 bytes).
    blob = git(repo, "hash-object", "-w", "--stdin", input=b"x\n").strip()
    base = git(repo, "ls-tree", "HEAD")
    tree = git(repo, "mktree", input=(base + f"100644 blob {blob}\t{'n' * 300}\n").encode()).strip()
    commit = git(repo, "commit-tree", tree, "-p", "HEAD", "-m", "long name").strip()
    git(repo, "update-ref", "HEAD", commit)
    git(repo, "read-tree", "HEAD")
    r = coord(repo, "verify", "--dry")
    assert r.code == 2, r.stdout + r.stderr
    assert "scratch checkout" in error_message(r)
    assert "Traceback" not in r.stderr
    assert len(worktrees(repo)) == 1 and scratch_left(repo) == []


def test_an_interrupted_run_leaves_nothing_a_later_run_trips_over(
        make_repo: MakeRepo, coord: Cli, tmp_path: Path) -> None:
    import os
    import signal
    import subprocess

    from testing.env import BIN
    from testing.wait import wait_until

    pid_file = tmp_path / "setup.pid"
    repo = generated_project(make_repo, toml(setup=[f"echo $$ > {pid_file}; exec sleep 60"]))
    p = subprocess.Popen([str(BIN / "coord"), "verify", "--dry", "--json"], cwd=repo,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(), what="setup runs")
        os.kill(p.pid, signal.SIGKILL)  # no cleanup runs
        p.wait()
    finally:
        if pid_file.exists() and pid_file.read_text().strip():
            with __import__("contextlib").suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
    # The killed run's checkout was cached and never marked ready; the next run sets it up
    # again from scratch and passes.
    slot = repo / ".git" / "coord" / "checkouts" / "0"
    assert not (slot / "ready").exists()
    write(repo, "coord.toml", toml(setup=["sh gen.sh"]))
    git(repo, "commit", "-qam", "a setup that finishes")
    r = coord(repo, "verify", "--dry")
    assert r.code == 0, r.stdout + r.stderr
    assert json.loads((slot / "ready").read_text())["commit"] == git(repo, "rev-parse", "HEAD").strip()


def test_a_temporary_checkout_of_a_killed_run_is_removed_by_the_next_run(
        make_repo: MakeRepo, coord: Cli, tmp_path: Path) -> None:
    import os
    import signal
    import subprocess

    from testing.env import BIN
    from testing.wait import wait_until

    pid_file = tmp_path / "check.pid"
    repo = generated_project(make_repo, toml(verify=[f"echo $$ > {pid_file}; exec sleep 60"],
                                             carry=["build"]))
    p = subprocess.Popen([str(BIN / "coord"), "verify", "--dry", "--json"], cwd=repo,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(), what="verify runs")
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
    finally:
        if pid_file.exists() and pid_file.read_text().strip():
            with __import__("contextlib").suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
    assert len(scratch_left(repo)) == 1 and len(worktrees(repo)) == 2  # what the kill left
    write(repo, "coord.toml", toml(verify=["sh suite.sh"], carry=["build"]))
    git(repo, "commit", "-qam", "the real suite")
    assert ok(coord(repo, "verify", "--dry"))["ok"] is True
    assert scratch_left(repo) == [] and len(worktrees(repo)) == 1


def test_a_busy_cached_checkout_is_not_shared_and_when_all_are_busy_a_temporary_one_serves(
        make_repo: MakeRepo, coord: Cli, worker: Cli, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    import fcntl
    import os

    from hunkwise.shared.git import checkout as git_checkout

    if os.environ.get("HUNKWISE_TEST_PROCESS") == "1":
        pytest.skip("MAX_SLOTS is patched in this process: the commands must run in it")
    where = tmp_path / "where.log"
    repo = generated_project(make_repo, toml(setup=["sh gen.sh"]))
    begin(coord, worker, repo, "A", "src.txt", checks=("sh suite.sh", f"pwd >> {where}"))
    write(repo, "src.txt", "u\n")
    ok(worker(repo, "check", "A"))
    base = repo / ".git" / "coord" / "checkouts"
    fd = os.open(base / "0.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another run holds slot 0
        ok(worker(repo, "check", "A"))
        assert (base / "1" / "ready").exists()  # the next slot served
        monkeypatch.setattr(git_checkout, "MAX_SLOTS", 1)
        ok(worker(repo, "check", "A"))  # every slot busy: a temporary checkout
        ran = where.read_text().split()
        assert [Path(p).parent.name for p in ran[:2]] == ["0", "1"]  # slot 0, then slot 1
        assert str(base) not in ran[2]  # then neither: a temporary checkout
        assert scratch_left(repo) == []
        assert len(worktrees(repo)) == 3  # the shared tree and the two cached slots
    finally:
        os.close(fd)
