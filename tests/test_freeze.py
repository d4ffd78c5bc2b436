"""Release freeze: `coord freeze`, `coord verify`, `coord thaw`, on real repositories.

A freeze closes a batch: worker mutations and accepts are refused, and `verify` proves
exactly the frozen commit in a clean checkout, then checks that nothing (HEAD, tree,
index) moved while it ran. Every test drives the real CLI on a real git repository;
the race test runs eight worker processes against the freeze at once.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from testing.cli import Cli, Result, assign_and_start, error_message, succeeded
from testing.env import BIN
from testing.project import FAILING_CHECK, project, verify_toml
from testing.repo import MakeRepo, git, numbered, write
from testing.wait import wait_until

SESS_A = "sess-20260101-0900-worker@box-a"
FREEZER = "sess-20260101-0900-release@ci"
W1 = "sess-20260101-0900-worker@box1"
W2 = "sess-20260101-0900-worker@box2"
W3 = "sess-20260101-0900-worker@box3"

# ---- helpers --------------------------------------------------------------------------------

def inbox_new(repo: Path) -> int:
    new = repo / ".git" / "coord" / "inbox" / "new"
    return len(os.listdir(new)) if new.exists() else 0


def states(coord: Cli, repo: Path) -> dict[str, dict[str, Any]]:
    r = coord(repo, "status")
    assert r.code == 0, r.stdout + r.stderr
    return {t["id"]: t for t in r.doc["tasks"]}


def tree_digest(repo: Path) -> dict[str, str]:
    """Every file of the working tree outside .git, tracked or not, by content digest."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(repo):
        dirnames[:] = [d for d in dirnames if not (Path(dirpath) == repo and d == ".git")]
        for name in filenames:
            p = Path(dirpath) / name
            out[str(p.relative_to(repo))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def worktrees(repo: Path) -> list[str]:
    out = git(repo, "worktree", "list", "--porcelain")
    return [line for line in out.splitlines() if line.startswith("worktree ")]


def freeze_time_parts(at: float) -> tuple[str, str]:
    when = dt.datetime.fromtimestamp(at, dt.timezone.utc)
    return when.strftime("%Y-%m-%d"), when.strftime("%H:%M")


def assign(coord: Cli, repo: Path, tid: str, *grants: str) -> Result:
    args = ["assign", tid, "--title", f"title of {tid}", "--expect", "it works"]
    for g in grants:
        args += ["--write", g]
    r = coord(repo, *args)
    assert r.code == 0, r.stdout + r.stderr
    return r


def start(worker: Cli, repo: Path, tid: str, session: str) -> Result:
    return worker(repo, "start", tid, session=session)


def deferred_edit_setup(coord: Cli, worker: Cli, repo: Path) -> None:
    """t1 is in progress and has left check.py failing in the shared tree."""
    assign(coord, repo, "t1", "check.py")
    succeeded(start(worker, repo, "t1", W1))
    write(repo, "check.py", FAILING_CHECK)


# ---- freeze ---------------------------------------------------------------------------------

def test_freeze_refused_while_a_task_is_in_progress_lists_the_ids(
        make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
    repo = project(make_repo)
    assign(coord, repo, "t1", "check.py")
    assign(coord, repo, "t2", "app.txt")
    assign(coord, repo, "t3", "notes.txt")
    succeeded(start(worker, repo, "t1", W1))
    succeeded(start(worker, repo, "t3", W3))

    r = coord(repo, "freeze")

    assert r.code == 3
    assert r.doc["error"]["code"] == 3
    assert "t1" in error_message(r) and "t3" in error_message(r)
    assert "t2" not in error_message(r)
    st = coord(repo, "status").doc
    assert st["freeze"] is None
    assert st["tasks"][0]["state"] == "in_progress"


def test_freeze_defer_running_moves_tasks_to_next_batch_and_keeps_their_edits(
        make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
    repo = project(make_repo)
    deferred_edit_setup(coord, worker, repo)
    assign(coord, repo, "t2", "app.txt")
    head = git(repo, "rev-parse", "HEAD").strip()

    r = succeeded(coord(repo, "freeze", "--defer-running"))

    fz = r.doc["freeze"]
    assert fz["commit"] == head
    assert fz["deferred"] == ["t1"]
    batch = fz["batch"]
    assert isinstance(batch, int)
    tasks = states(coord, repo)
    assert tasks["t1"]["state"] == "deferred"
    assert tasks["t1"]["batch"] == batch + 1
    assert tasks["t2"]["state"] == "assigned"
    assert tasks["t2"]["batch"] == batch
    # A deferred task keeps its edits in the shared tree.
    assert (repo / "check.py").read_text() == FAILING_CHECK
    assert git(repo, "status", "--porcelain") == " M check.py\n"


def test_second_freeze_is_idempotent(make_repo: MakeRepo, coord: Cli) -> None:
    repo = project(make_repo)
    first = succeeded(coord(repo, "freeze", session=FREEZER)).doc["freeze"]
    git(repo, "commit", "-q", "--allow-empty", "-m", "sneaked in")

    second = coord(repo, "freeze", session=W1)

    assert second.code == 0
    again = second.doc["freeze"]
    assert again["commit"] == first["commit"]
    assert again["batch"] == first["batch"]
    assert coord(repo, "status").doc["freeze"]["by"] == FREEZER


# ---- refusals while frozen --------------------------------------------------------------------

@pytest.fixture
def frozen_repo(make_repo: MakeRepo, coord: Cli, worker: Cli) -> tuple[Path, dict[str, Any]]:
    """t1 deferred mid-edit, t2 reported (valid), t3 assigned; frozen by FREEZER."""
    repo = project(make_repo)
    deferred_edit_setup(coord, worker, repo)
    assign(coord, repo, "t2", "app.txt")
    assign(coord, repo, "t3", "notes.txt")
    succeeded(start(worker, repo, "t2", W2))
    write(repo, "app.txt", numbered(10).replace("line 4\n", "line four\n"))
    succeeded(worker(repo, "done", "t2", "--summary", "spelled out four", session=W2))
    fz = succeeded(coord(repo, "freeze", "--defer-running", session=FREEZER)).doc["freeze"]
    return repo, fz


def test_worker_mutations_are_refused_while_frozen_naming_since_when_and_by_whom(
        frozen_repo: tuple[Path, dict[str, Any]], coord: Cli, worker: Cli) -> None:
    repo, fz = frozen_repo
    day, minute = freeze_time_parts(coord(repo, "status").doc["freeze"]["at"])
    before_inbox = inbox_new(repo)
    before = {tid: t["state"] for tid, t in states(coord, repo).items()}
    attempts = {
        "worker start": ("start", "t3"),
        "worker done": ("done", "t1"),
        "worker blocked": ("blocked", "t1", "--reason", "waiting on the schema"),
        "worker failed": ("failed", "t1", "--reason", "cannot be done"),
    }

    for name, args in attempts.items():
        r = worker(repo, *args, session=W1 if args[1] == "t1" else W3)
        assert r.code == 3, f"{name}: exit {r.code}: {r.stdout}{r.stderr}"
        msg = error_message(r)
        assert "freeze" in msg, f"{name}: {msg}"
        assert FREEZER in msg, f"{name} does not say by whom: {msg}"
        assert day in msg and minute in msg, f"{name} does not say since when: {msg}"
        assert FREEZER in r.stderr

    assert inbox_new(repo) == before_inbox
    assert {tid: t["state"] for tid, t in states(coord, repo).items()} == before


def test_accept_is_refused_while_frozen_naming_since_when_and_by_whom(
        frozen_repo: tuple[Path, dict[str, Any]], coord: Cli) -> None:
    repo, fz = frozen_repo
    head = git(repo, "rev-parse", "HEAD").strip()
    day, minute = freeze_time_parts(coord(repo, "status").doc["freeze"]["at"])

    r = coord(repo, "accept", "t2")

    assert r.code == 3
    assert git(repo, "rev-parse", "HEAD").strip() == head
    assert states(coord, repo)["t2"]["state"] == "reported"
    msg = error_message(r)
    assert "freeze" in msg
    assert FREEZER in msg and day in msg and minute in msg, msg


def test_accept_is_refused_while_frozen_and_commits_nothing(
        frozen_repo: tuple[Path, dict[str, Any]], coord: Cli) -> None:
    repo, fz = frozen_repo
    head = git(repo, "rev-parse", "HEAD").strip()

    r = coord(repo, "accept", "t2")

    assert r.code == 3
    assert "freeze" in error_message(r)
    assert git(repo, "rev-parse", "HEAD").strip() == head == fz["commit"]
    assert git(repo, "diff", "--cached", "--name-only") == ""
    assert states(coord, repo)["t2"]["state"] == "reported"
    # Thawed, the same report is accepted: the refusal was the freeze, not the report.
    succeeded(coord(repo, "thaw"))
    done = succeeded(coord(repo, "accept", "t2")).doc
    assert done["paths"] == ["app.txt"]


def test_assign_during_freeze_lands_in_next_batch_and_starts_only_after_thaw(
        make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
    repo = project(make_repo)
    fz = succeeded(coord(repo, "freeze", session=FREEZER)).doc["freeze"]

    t = assign(coord, repo, "t9", "notes.txt").doc["task"]

    assert t["batch"] == fz["batch"] + 1
    assert t["state"] == "assigned"
    refused = start(worker, repo, "t9", W1)
    assert refused.code == 3
    assert states(coord, repo)["t9"]["state"] == "assigned"

    succeeded(coord(repo, "thaw"))
    started = succeeded(start(worker, repo, "t9", W1)).doc
    assert started["task"]["state"] == "in_progress"
    assert started["task"]["batch"] == fz["batch"] + 1


# ---- verify: what it proves -------------------------------------------------------------------

def test_verify_passes_on_frozen_commit_despite_failing_edits_in_shared_tree(
        make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
    repo = project(make_repo)
    deferred_edit_setup(coord, worker, repo)
    # Sanity: in the shared tree the check really fails.
    in_tree = subprocess.run([sys.executable, "check.py"], cwd=repo, capture_output=True)
    assert in_tree.returncode == 1
    fz = succeeded(coord(repo, "freeze", "--defer-running")).doc["freeze"]

    r = coord(repo, "verify")

    assert r.code == 0, r.stdout + r.stderr
    assert r.doc["ok"] is True
    assert r.doc["commit"] == fz["commit"]
    assert r.doc["problems"] == []
    (cmd,) = r.doc["commands"]
    assert cmd["command"] == "python3 check.py"
    assert cmd["exit_code"] == 0
    assert cmd["duration_s"] >= 0
    assert (repo / "check.py").read_text() == FAILING_CHECK


@pytest.mark.parametrize("change", ["edit", "create", "delete"])
def test_a_file_changed_during_the_freeze_fails_verify_until_undone(
        make_repo: MakeRepo, coord: Cli, change: str) -> None:
    repo = project(make_repo)
    succeeded(coord(repo, "freeze"))
    original = (repo / "notes.txt").read_bytes()
    if change == "edit":
        write(repo, "notes.txt", "notes\nslipped in during the freeze\n")
    elif change == "create":
        write(repo, "notes.txt.new", "slipped in\n")
    else:
        (repo / "notes.txt").unlink()
    path = "notes.txt.new" if change == "create" else "notes.txt"

    bad = coord(repo, "verify")

    assert bad.code == 1
    assert bad.doc["ok"] is False
    assert any(path in p for p in bad.doc["problems"]), bad.doc["problems"]

    if change == "create":
        (repo / "notes.txt.new").unlink()
    else:
        write(repo, "notes.txt", original)
    good = coord(repo, "verify")
    assert good.code == 0, good.doc["problems"]
    assert good.doc["ok"] is True


def test_ignored_build_output_written_during_the_freeze_does_not_fail_verify(
        make_repo: MakeRepo, coord: Cli) -> None:
    repo = project(make_repo, files={".gitignore": "build/\n"})
    succeeded(coord(repo, "freeze"))
    write(repo, "build/out.bin", b"\0artifact")

    r = coord(repo, "verify")

    assert r.code == 0, r.doc["problems"]


def test_a_plain_git_commit_during_the_freeze_fails_verify(make_repo: MakeRepo, coord: Cli) -> None:
    repo = project(make_repo)
    fz = succeeded(coord(repo, "freeze")).doc["freeze"]
    write(repo, "notes.txt", "committed behind the coordinator's back\n")
    git(repo, "commit", "-q", "-am", "sneaky")
    new_head = git(repo, "rev-parse", "HEAD").strip()

    r = coord(repo, "verify")

    assert r.code == 1
    assert r.doc["ok"] is False
    assert r.doc["commit"] == fz["commit"]
    assert any("HEAD" in p and new_head in p for p in r.doc["problems"]), r.doc["problems"]


def test_staging_during_the_freeze_fails_verify(make_repo: MakeRepo, coord: Cli) -> None:
    repo = project(make_repo)
    # The new file exists before the freeze, so only the index changes afterwards.
    write(repo, "draft.txt", "draft\n")
    succeeded(coord(repo, "freeze"))
    git(repo, "add", "draft.txt")

    r = coord(repo, "verify")

    assert r.code == 1
    assert any("index" in p or "staged" in p for p in r.doc["problems"]), r.doc["problems"]
    git(repo, "reset", "-q", "draft.txt")
    assert coord(repo, "verify").code == 0


def test_a_thaw_during_verify_fails_it(make_repo: MakeRepo, coord: Cli) -> None:
    repo = project(make_repo)
    thaw_cmd = f"{shlex.quote(str(BIN / 'coord'))} thaw --repo {shlex.quote(str(repo))}"
    write(repo, "coord.toml", verify_toml([thaw_cmd]))
    git(repo, "commit", "-q", "-am", "verify thaws")
    succeeded(coord(repo, "freeze"))

    r = coord(repo, "verify")

    assert r.code == 1
    assert r.doc["commands"][0]["exit_code"] == 0
    assert any("freeze" in p for p in r.doc["problems"]), r.doc["problems"]


def test_a_write_to_the_shared_tree_while_verify_runs_fails_it(
        make_repo: MakeRepo, coord: Cli) -> None:
    repo = project(make_repo)
    target = repo / "notes.txt"
    write(repo, "coord.toml", verify_toml([f"echo late >> {shlex.quote(str(target))}"]))
    git(repo, "commit", "-q", "-am", "verify writes to the shared tree")
    succeeded(coord(repo, "freeze"))

    r = coord(repo, "verify")

    assert r.code == 1
    assert any("notes.txt" in p for p in r.doc["problems"]), r.doc["problems"]


# ---- verify: commands that misbehave -----------------------------------------------------------

def test_a_failing_verify_command_records_its_exit_code(make_repo: MakeRepo, coord: Cli) -> None:
    repo = project(make_repo, ["python3 check.py", "exit 7"])
    succeeded(coord(repo, "freeze"))

    r = coord(repo, "verify")

    assert r.code == 1
    assert r.doc["ok"] is False
    by_cmd = {c["command"]: c for c in r.doc["commands"]}
    assert by_cmd["python3 check.py"]["exit_code"] == 0
    assert by_cmd["exit 7"]["exit_code"] == 7
    assert any("exit 7" in p for p in r.doc["problems"]), r.doc["problems"]
    assert len(worktrees(repo)) == 1


def test_a_hanging_verify_command_times_out_cleanly_and_quickly(
        make_repo: MakeRepo, coord: Cli, tmp_path: Path) -> None:
    pidfile = tmp_path / "sleeper.pid"
    hang = f"sleep 30 & echo $! > {shlex.quote(str(pidfile))}; wait"
    repo = project(make_repo, [hang], timeout=1)
    succeeded(coord(repo, "freeze"))

    t0 = time.monotonic()
    r = coord(repo, "verify", timeout=25)
    elapsed = time.monotonic() - t0

    assert r.code == 1
    assert elapsed < 8, f"verify took {elapsed:.1f}s for a 1s timeout"
    (cmd,) = r.doc["commands"]
    assert cmd["exit_code"] != 0
    assert cmd["duration_s"] < 5
    assert any("timed out" in p for p in r.doc["problems"]), r.doc["problems"]
    # The whole process group went, not just the shell.
    pid = int(pidfile.read_text())
    status = Path(f"/proc/{pid}/status")
    alive = status.exists() and "State:\tZ" not in status.read_text()
    assert not alive, f"sleep {pid} outlived the timeout"
    assert len(worktrees(repo)) == 1


@pytest.mark.parametrize("sig", [
    pytest.param(signal.SIGINT, id="SIGINT"),
    pytest.param(signal.SIGTERM, id="SIGTERM"),
])
def test_a_cancelled_verify_cleans_up_its_worktree_and_command(
        make_repo: MakeRepo, coord: Cli, tmp_path: Path, sig: signal.Signals) -> None:
    # CI cancels a job with SIGINT or SIGTERM; the shared repo must not keep the checkout.
    pidfile = tmp_path / "sleeper.pid"
    repo = project(make_repo, [f"sleep 30 & echo $! > {shlex.quote(str(pidfile))}; wait"])
    succeeded(coord(repo, "freeze"))
    proc = subprocess.Popen([str(BIN / "coord"), "verify", "--json"], cwd=repo,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    pid = 0
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (
                pidfile.exists() and pidfile.read_text().strip()):
            time.sleep(0.02)
        pid = int(pidfile.read_text())
        stat = Path(f"/proc/{pid}/stat")
        # The process is known by its pid and its start time: a busy machine (pid_max is
        # often 32768) may give a dead process's pid to a new one within seconds.
        born = stat.read_text().rsplit(")", 1)[1].split()[19]
        proc.send_signal(sig)
        proc.communicate(timeout=60)

        assert proc.returncode != 0
        assert len(worktrees(repo)) == 1, git(repo, "worktree", "list")

        def gone() -> bool:
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                return True
            return fields[0] == "Z" or fields[19] != born  # killed, not yet reaped; or reused

        # SIGKILL was sent before verify exited; a loaded machine may take a moment to
        # carry it out, so wait for the condition instead of sampling once.
        wait_until(gone, timeout=15, what=f"the verify command (pid {pid}) to die")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for line in worktrees(repo)[1:]:
            where = line.split(" ", 1)[1]
            git(repo, "worktree", "remove", "--force", where, check=False)
            git(repo, "worktree", "prune", check=False)
            if Path(where).parent.exists():
                Path(where).parent.rmdir()


def test_a_verify_command_printing_megabytes_keeps_the_json_small(
        make_repo: MakeRepo, coord: Cli) -> None:
    repo = project(make_repo, ["python3 -c \"print('x' * 10_000_000)\""])
    succeeded(coord(repo, "freeze"))

    r = coord(repo, "verify")

    assert r.code == 0
    assert r.doc["ok"] is True
    assert len(r.stdout) < 200_000, f"verify --json printed {len(r.stdout)} bytes"


def test_a_verify_command_printing_many_lines_completes(make_repo: MakeRepo, coord: Cli) -> None:
    repo = project(make_repo, ["python3 -c \"print(('y' * 60 + '\\n') * 100_000)\""])
    succeeded(coord(repo, "freeze"))

    r = coord(repo, "verify")

    assert r.code == 0, r.doc
    assert len(r.stdout) < 200_000, f"verify --json printed {len(r.stdout)} bytes"


def test_verify_when_not_frozen_is_refused_and_runs_nothing(make_repo: MakeRepo,
                                                           coord: Cli) -> None:
    repo = project(make_repo, ["touch ran.marker"])

    r = coord(repo, "verify")

    assert r.code == 3
    assert "not frozen" in r.doc["error"]["message"]
    human = coord(repo, "verify", json_out=False)
    assert human.code == 3
    assert "coord freeze" in human.stderr
    assert not list(repo.rglob("ran.marker"))


def test_verify_junit_has_one_testcase_per_command_with_failures_marked(
        make_repo: MakeRepo, coord: Cli, tmp_path: Path) -> None:
    tricky = "python3 -c \"print('<&>\\\"]]>'); raise SystemExit(3)\""
    repo = project(make_repo, ["python3 check.py", tricky, "exit 5"])
    succeeded(coord(repo, "freeze"))
    junit = tmp_path / "out" / "verify.xml"
    junit.parent.mkdir()

    r = coord(repo, "verify", "--junit", str(junit))

    assert r.code == 1
    suite = ET.parse(junit).getroot()
    if suite.tag == "testsuites":
        (suite,) = list(suite)
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["python3 check.py", tricky, "exit 5"]
    failed = {c.get("name") for c in cases
              if c.find("failure") is not None or c.find("error") is not None}
    assert failed == {tricky, "exit 5"}
    tricky_case = cases[1].find("failure")
    assert tricky_case is not None and "<&>\"]]>" in (tricky_case.text or "")
    assert suite.get("tests") == "3"
    assert suite.get("failures") == "2"


def test_verify_junit_stays_valid_xml_when_a_command_prints_ansi_colour(
        make_repo: MakeRepo, coord: Cli, tmp_path: Path) -> None:
    repo = project(make_repo, ["printf '\\033[31mFAILED\\033[0m test_x\\n'; exit 1"])
    succeeded(coord(repo, "freeze"))
    junit = tmp_path / "verify.xml"

    r = coord(repo, "verify", "--junit", str(junit))

    assert r.code == 1
    suite = ET.parse(junit).getroot()
    (case,) = suite.iter("testcase")
    assert case.find("failure") is not None


def test_verify_leaves_no_worktree_and_does_not_touch_the_shared_tree(
        make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
    # The command writes a file and stages it: in the clean checkout, never here.
    repo = project(make_repo, ["python3 check.py", "echo made > made-by-verify.txt && git add -A"])
    deferred_edit_setup(coord, worker, repo)
    write(repo, "untracked.txt", "someone's new file\n")
    succeeded(coord(repo, "freeze", "--defer-running"))
    files_before = tree_digest(repo)
    status_before = git(repo, "status", "--porcelain", "--untracked-files=all")
    index_before = git(repo, "ls-files", "-s")
    head_before = git(repo, "rev-parse", "HEAD")
    refs = ("for-each-ref", "--format=%(refname) %(objectname)", "refs/heads")
    branches_before = git(repo, *refs)

    r = coord(repo, "verify")

    assert r.code == 0, r.doc["problems"]
    assert len(worktrees(repo)) == 1, git(repo, "worktree", "list")
    assert not (repo / "made-by-verify.txt").exists()
    assert tree_digest(repo) == files_before
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == status_before
    assert git(repo, "ls-files", "-s") == index_before
    assert git(repo, "rev-parse", "HEAD") == head_before
    assert git(repo, *refs) == branches_before
    # And it can run again: nothing it did counts as a change to the frozen set.
    assert coord(repo, "verify").code == 0


# ---- the CI recipe -----------------------------------------------------------------------------

@pytest.mark.parametrize("passing", [True, False])
def test_ci_recipe_in_a_fresh_clone(make_repo: MakeRepo, tmp_path: Path, passing: bool) -> None:
    commands = ["python3 check.py"] if passing else ["python3 check.py", "exit 4"]
    src = project(make_repo, commands)
    ci = tmp_path / "ci-clone"
    subprocess.run(["git", "clone", "-q", str(src), str(ci)], check=True, capture_output=True)
    assert not (ci / ".git" / "coord").exists()

    p = subprocess.run(["bash", "-c", "coord freeze && coord verify"], cwd=ci,
                       capture_output=True, text=True, timeout=120)

    if passing:
        assert p.returncode == 0, p.stdout + p.stderr
    else:
        assert p.returncode != 0, p.stdout + p.stderr
    assert git(ci, "status", "--porcelain", "--untracked-files=all") == ""
    assert len(worktrees(ci)) == 1
    # The source repository is not frozen by its clone's CI run.
    src_status = subprocess.run([str(BIN / "coord"), "status", "--json"], cwd=src,
                                capture_output=True, text=True)
    assert json.loads(src_status.stdout)["freeze"] is None


# ---- thaw ---------------------------------------------------------------------------------------

def test_thaw_lifts_the_freeze_and_reopens_deferred_tasks(
        make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
    repo = project(make_repo)
    deferred_edit_setup(coord, worker, repo)
    assert coord(repo, "status").doc["freeze"] is None
    fz = succeeded(coord(repo, "freeze", "--defer-running", session=FREEZER)).doc["freeze"]

    during = coord(repo, "status").doc["freeze"]
    assert isinstance(during, dict)
    assert during["batch"] == fz["batch"]
    assert during["by"] == FREEZER
    assert during["commit"] == fz["commit"]

    succeeded(coord(repo, "thaw"))

    st = coord(repo, "status").doc
    assert st["freeze"] is None
    (t1,) = st["tasks"]
    assert t1["state"] == "assigned"
    assert t1["batch"] == fz["batch"] + 1
    assert (repo / "check.py").read_text() == FAILING_CHECK
    again = succeeded(start(worker, repo, "t1", W2)).doc
    assert again["task"]["state"] == "in_progress"
    # The deferred edit is still the task's: it reports and the coordinator can accept it.
    succeeded(worker(repo, "done", "t1", "--no-run-checks", session=W2))
    accepted = succeeded(coord(repo, "accept", "t1")).doc
    assert accepted["paths"] == ["check.py"]
    # A new freeze closes the new batch.
    fz2 = succeeded(coord(repo, "freeze")).doc["freeze"]
    assert fz2["batch"] == fz["batch"] + 1
    assert fz2["commit"] == accepted["commit"]


def test_thaw_then_verify_is_not_frozen(make_repo: MakeRepo, coord: Cli) -> None:
    repo = project(make_repo)
    succeeded(coord(repo, "freeze"))
    assert coord(repo, "verify").code == 0
    succeeded(coord(repo, "thaw"))

    assert coord(repo, "verify").code == 3


# ---- the race: eight workers against one freeze -------------------------------------------------

# One driver process per worker: it runs its `worker` commands one after another in
# itself (`main(argv)`, as the suite's in-process runs do; the executable with
# HUNKWISE_TEST_PROCESS=1), so the eight race each other and the freeze as eight processes
# without paying an interpreter start per command.
DRIVER = r"""
import contextlib, io, json, os, subprocess, sys, time
repo, session, log, stop, *tasks = sys.argv[1:]
os.environ["COORD_SESSION"] = session
os.chdir(repo)
if os.environ.get("HUNKWISE_TEST_PROCESS") == "1":
    exe = os.path.join(os.path.dirname(sys.executable), "worker")

    def run(argv):
        p = subprocess.run([exe, *argv], capture_output=True, text=True)
        return p.returncode, p.stderr
else:
    from hunkwise.worker.cli import main

    def run(argv):
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            return main(argv), err.getvalue()
mine = os.path.join(repo, session.split("@")[1])
os.makedirs(mine, exist_ok=True)
with open(log, "a") as out:
    for tid in tasks:
        for args in (["start", tid], ["done", tid, "--no-run-checks"]):
            if os.path.exists(stop):
                sys.exit(0)
            if args[0] == "done":
                with open(os.path.join(mine, tid + ".txt"), "w") as f:
                    f.write(tid + "\n")
            t0 = time.time()
            rc, err = run([*args, "--json"])
            out.write(json.dumps({"cmd": args[0], "task": tid, "rc": rc,
                                  "t0": t0, "err": err[-300:]}) + "\n")
            out.flush()
"""


def log_entries(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    text = log.read_text()
    return [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines()]


@pytest.mark.slow
def test_no_report_lands_after_freeze_returns_while_eight_workers_race(
        make_repo: MakeRepo, coord: Cli, tmp_path: Path) -> None:
    from hunkwise.coordinator import tasks as coord_tasks
    from hunkwise.shared.state.context import open_repo

    repo = project(make_repo)
    ctx = open_repo(str(repo))
    n_proc, per_proc = 8, 8
    plan: dict[int, list[str]] = {}
    for i in range(n_proc):
        plan[i] = [f"w{i}-t{j:02d}" for j in range(per_proc)]
        for tid in plan[i]:
            coord_tasks.assign(ctx, task_id=tid, title=tid, expect="a line",
                               writes=[f"m{i}/{tid}.txt"], checks=[], exclusive=False)
    stop = tmp_path / "stop"
    logs = [tmp_path / f"log{i}.jsonl" for i in range(n_proc)]
    procs = [subprocess.Popen([sys.executable, "-c", DRIVER, str(repo),
                               f"sess-20260101-0900-racer@m{i}", str(logs[i]), str(stop), *plan[i]])
             for i in range(n_proc)]
    try:
        deadline = time.monotonic() + 90
        while inbox_new(repo) < n_proc // 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert inbox_new(repo) >= n_proc // 2, "the workers never got going"

        fr = coord(repo, "freeze", "--defer-running")
        frozen_at = time.time()
        landed_at_freeze = inbox_new(repo)
        assert fr.code == 0, fr.stdout + fr.stderr
        reported_at_freeze = {tid for tid, t in states(coord, repo).items()
                              if t["state"] == "reported"}
        # Let every worker run into the freeze at least once (or run out of tasks).
        while time.monotonic() < deadline:
            tried = [any(e["t0"] > frozen_at for e in log_entries(log)) or p.poll() is not None
                     for log, p in zip(logs, procs, strict=True)]
            if all(tried):
                break
            time.sleep(0.05)
    finally:
        stop.touch()
        for p in procs:
            p.wait(timeout=60)

    assert inbox_new(repo) == landed_at_freeze
    final = states(coord, repo)
    assert {tid for tid, t in final.items() if t["state"] == "reported"} == reported_at_freeze
    assert len(reported_at_freeze) == landed_at_freeze
    for tid in fr.doc["freeze"]["deferred"]:
        assert final[tid]["state"] == "deferred"
    assert not [tid for tid, t in final.items() if t["state"] == "in_progress"]

    entries = [e for log in logs for e in log_entries(log)]
    assert {e["rc"] for e in entries} <= {0, 3}, [e for e in entries if e["rc"] not in (0, 3)]
    after = [e for e in entries if e["t0"] > frozen_at]
    met = {e["task"].split("-")[0] for e in after}
    assert len(met) >= n_proc // 2, f"too few workers met the freeze: {sorted(met)}"
    assert all(e["rc"] == 3 for e in after), [e for e in after if e["rc"] != 3]
    assert all("freeze" in e["err"] for e in after), [e["err"] for e in after]


def test_verify_runs_the_frozen_commits_commands(make_repo, coord, worker) -> None:
    repo = make_repo({"coord.toml": '[verify]\ncommands = ["test -f marker"]\n'})
    assign_and_start(coord, worker, repo, "A", "coord.toml",
          lambda: write(repo, "coord.toml", '[verify]\ncommands = ["true"]\n'))
    assert coord(repo, "freeze", "--defer-running").code == 0
    r = coord(repo, "verify")
    assert r.code == 1
    assert [c["command"] for c in r.doc["commands"]] == ["test -f marker"]


def test_what_changes_no_code_is_allowed_while_frozen(make_repo, coord, worker) -> None:
    """Was: heartbeat, checkpoint and ask were refused during a freeze, so a reported
    task's claim expired during a long verify."""
    repo = make_repo({"a.txt": "1\n", "coord.toml": '[verify]\ncommands = ["true"]\n'})
    assign_and_start(coord, worker, repo, "A", "a.txt", lambda: write(repo, "a.txt", "2\n"), session=SESS_A)
    assert worker(repo, "done", "A", session=SESS_A).code == 0
    assert coord(repo, "freeze").code == 0
    assert worker(repo, "heartbeat", "A", session=SESS_A).code == 0
    assert worker(repo, "checkpoint", "A", "--next", "resume a.txt", session=SESS_A).code == 0
    assert worker(repo, "ask", "A", "--question", "ship it?", session=SESS_A).code == 0
    assert worker(repo, "signal", "--to", "*", "--type", "BLOCKED_ON", "--about", "A",
                  session=SESS_A).code == 0
    assert worker(repo, "signals", "--ack", session=SESS_A).code == 0
    v = coord(repo, "verify")
    assert v.code == 0, v.doc["problems"]  # none of it touched the frozen set
