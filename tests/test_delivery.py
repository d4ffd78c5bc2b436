"""`worker done` delivers a report in three steps (inbox/delivery.py): staged and fsynced in
the inbox's tmp/ before the state lock, recorded in the state under it, published into
new/ after it. These tests kill it between every two steps, run two at once on one task,
race a delivery against `coord inbox`, and watch what happens while the state lock is
held: never git, never a check, never an fsync of anything but the state.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from hunkwise.inbox import delivery, maildir
from hunkwise.shared.state import store

from testing.cli import Cli, assign_and_start, ok, run_cli
from testing.env import BIN, ROOT
from testing.repo import MakeRepo, git, numbered, set_line, write

SESS_A = "sess-20260101-0900-worker@box-a"
SESS_B = "sess-20260101-0901-worker@box-b"
STEPS = ["worker-staged", "worker-recorded", "worker-delivered"]


def inbox_files(repo: Path, *folders: str) -> list[Path]:
    base = repo / ".git" / "coord" / "inbox"
    return sorted(p for f in folders if (base / f).is_dir() for p in (base / f).iterdir())


def revision_of(p: Path) -> int:
    return int(p.name.rsplit("rev=", 1)[1])


def task_state(repo: Path, tid: str) -> Any:
    return store.load(store.layout(repo)).tasks[tid]


def started(make_repo: MakeRepo, coord: Cli, worker: Cli, *checks: str) -> Path:
    repo = make_repo({"a.txt": numbered(5), "b.txt": numbered(5), "c.txt": numbered(5)})
    for tid, grant in (("A", "a.txt"), ("B", "b.txt")):
        args = ["assign", tid, "--title", f"{tid} task", "--expect", "e", "--write", grant]
        for c in checks:
            args += ["--check", c]
        ok(coord(repo, *args))
        ok(worker(repo, "start", tid))
    set_line(repo, "a.txt", 2, "A's line")
    return repo


def assert_agreed(repo: Path, tid: str) -> None:
    """The state and the inbox agree: the newest revision the state handed out is visible
    as exactly the file it recorded, no other visible file has that revision or a newer
    one, and its snapshot ref holds the snapshot it recorded (until accepted)."""
    task = task_state(repo, tid)
    visible = [p for p in inbox_files(repo, "new", "cur") if f",task={tid}," in p.name]
    revisions = [revision_of(p) for p in visible]
    assert len(revisions) == len(set(revisions)), "two visible reports share a revision"
    assert all(r <= task.revision for r in revisions)
    if task.revision:
        newest = [p.name for p in visible if revision_of(p) == task.revision]
        assert newest == [task.last_report]
        assert not (repo / ".git" / "coord" / "inbox" / "tmp" / task.last_report).exists()
    if str(task.state) == "reported":
        assert task.saved.ref == f"refs/hunkwise/snapshots/{tid}/r{task.revision}"
        assert git(repo, "rev-parse", task.saved.ref).strip() == task.saved.tree


# ---- killed between two steps ----------------------------------------------------------

@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("then", ["next", "inbox", "status", "accept", "done"])
def test_worker_done_killed_at_each_step_delivers_once_or_not_at_all(
        make_repo: MakeRepo, coord: Cli, worker: Cli, step: str, then: str) -> None:
    repo = started(make_repo, coord, worker)
    r = run_cli("worker", repo, "done", "A", process=True, env={"HUNKWISE_TEST_KILL_AT": step})
    assert r.code == -9, r.stdout + r.stderr
    recorded = step != "worker-staged"
    assert str(task_state(repo, "A").state) == ("reported" if recorded else "in_progress")
    if then == "accept" and not recorded:
        assert coord(repo, "accept", "A").code == 3  # nothing was delivered: in progress
    elif then == "next":
        doc = ok(coord(repo, "next"))
        assert (doc["next"] is not None) == recorded
        if recorded:
            assert doc["next"]["report"]["revision"] == 1 and doc["next"]["validation"]["ok"]
    elif then == "inbox":
        assert [row["revision"] for row in ok(coord(repo, "inbox"))["reports"]] == \
            ([1] if recorded else [])
    elif then == "accept":
        ok(coord(repo, "accept", "A"))
    else:
        ok(coord(repo, then) if then != "done" else worker(repo, "done", "A"))
    ok(coord(repo, "inbox"))
    assert_agreed(repo, "A")
    if str(task_state(repo, "A").state) != "accepted":
        if str(task_state(repo, "A").state) == "in_progress":
            ok(worker(repo, "done", "A"))
        ok(coord(repo, "accept", "A"))
    assert git(repo, "show", "HEAD:a.txt") == numbered(5).replace("line 2", "A's line")
    assert git(repo, "for-each-ref", "refs/hunkwise/snapshots/A/") == ""


def test_a_staged_report_is_taken_over_only_once_its_writer_is_gone(make_repo: MakeRepo) -> None:
    repo = make_repo({"a.txt": "a\n"})
    box = repo / ".git" / "coord" / "inbox"
    staged = maildir.stage(box, b"{}", "A", 1)
    assert maildir.adopt(box, staged.name) is None  # its writer holds it
    os.close(staged.fd)  # the writer dies: its lock goes with it
    taken = maildir.adopt(box, staged.name)
    assert taken is not None
    assert maildir.adopt(box, staged.name) is None  # one taker at a time
    final = maildir.publish(taken)
    assert final.read_bytes() == b"{}" and not staged.path.exists()
    assert maildir.adopt(box, staged.name) is None  # published: nothing left to take
    os.mkfifo(staged.path)  # planted under a recorded name: never waited on
    answered: list[Any] = []
    t = threading.Thread(target=lambda: answered.append(maildir.adopt(box, staged.name)),
                         daemon=True)
    t.start()
    t.join(30)
    assert answered == [None]


def test_deliver_keeps_what_the_state_took_and_drops_the_rest(tmp_path: Path) -> None:
    """The three steps in one call: a report the record step links stays (made durable),
    one it leaves is published by `publish` when given, else dropped; when the record step
    fails, only what it linked stays. Nothing is ever left in tmp/."""
    box = tmp_path / "inbox"
    drafts = [delivery.Draft(b'{"n": 1}', "A", 1), delivery.Draft(b'{"n": 2}', "B", 1)]

    def link_first(d: delivery.Delivery) -> str:
        d.link(d.staged[0])
        return "taken"

    result, paths = delivery.deliver(box, drafts, link_first, lasting=False)
    assert result == "taken" and [p.read_bytes() for p in paths.values()] == [b'{"n": 1}']
    assert len(list((box / "new").iterdir())) == 1 and list((box / "tmp").iterdir()) == []

    _, paths = delivery.deliver(box, drafts[1:], lambda d: None, publish=maildir.publish)
    assert [p.read_bytes() for p in paths.values()] == [b'{"n": 2}']

    def link_then_fail(d: delivery.Delivery) -> None:
        d.link(d.staged[1])
        raise RuntimeError("the state refused")

    with pytest.raises(RuntimeError):
        delivery.deliver(box, drafts, link_then_fail, publish=maildir.publish)
    assert len(list((box / "new").iterdir())) == 3 and list((box / "tmp").iterdir()) == []


def test_settle_runs_once_per_command(make_repo: MakeRepo, coord: Cli, worker: Cli,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The first settle of a command reads the state when tmp/ holds something; a second
    call with the same context (the same command) does not look again."""
    from hunkwise.shared.state.context import open_repo

    repo = started(make_repo, coord, worker)
    tmp = repo / ".git" / "coord" / "inbox" / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "left-by-a-killed-writer").write_bytes(b"{}")
    loads: list[object] = []
    real = store.load
    monkeypatch.setattr(store, "load", lambda lay: loads.append(lay) or real(lay))
    ctx = open_repo(str(repo))
    assert delivery.settle(ctx) == [] and ctx.settled and len(loads) == 1
    assert delivery.settle(ctx) == [] and len(loads) == 1
    assert delivery.settle(open_repo(str(repo))) == [] and len(loads) == 2  # a new command


# ---- two at once -----------------------------------------------------------------------

def test_concurrent_dones_of_one_task_never_deliver_one_revision_twice(
        make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
    repo = started(make_repo, coord, worker)
    procs = [subprocess.Popen([str(BIN / "worker"), "done", "A", "--json"], cwd=repo,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=dict(os.environ)) for _ in range(6)]
    outs = [p.communicate(timeout=120) for p in procs]
    delivered = []
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode in (0, 3), err.decode()
        if p.returncode == 0:
            delivered.append(json.loads(out)["report"]["revision"])
        else:
            assert "nothing was delivered" in err.decode()
    task = task_state(repo, "A")
    assert sorted(delivered) == list(range(1, task.revision + 1)) and delivered
    assert sorted(revision_of(p) for p in inbox_files(repo, "new")) == sorted(delivered)
    assert inbox_files(repo, "tmp") == []
    assert_agreed(repo, "A")


def test_a_report_delivered_while_coord_inbox_reads_is_listed_or_not_never_quarantined(
        make_repo: MakeRepo, coord: Cli, worker: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """`coord inbox` reads the state and lists new/ without the lock: a `worker done`
    landing between the two must not look like a revision the state never handed out."""
    import inspect

    repo = started(make_repo, coord, worker)
    ok(worker(repo, "done", "A"))
    set_line(repo, "a.txt", 2, "A's second try")  # revision 2 lands during the read
    real = store.load
    raced = []

    def load(lay: store.Layout) -> Any:
        state = real(lay)
        caller = inspect.currentframe().f_back  # type: ignore[union-attr]
        if not raced and caller is not None and caller.f_code.co_name == "pending":
            raced.append(ok(run_cli("worker", repo, "done", "A", process=True)))
        return state

    monkeypatch.setattr(store, "load", load)
    ok(coord(repo, "inbox"))
    monkeypatch.undo()
    assert raced and inbox_files(repo, "quarantine") == []
    assert [row["revision"] for row in ok(coord(repo, "inbox"))["reports"]] == [2]


# ---- nothing slow under the state lock ---------------------------------------------------



@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="names fsynced files by /proc")
def test_worker_done_holds_the_state_lock_for_the_state_alone(
        make_repo: MakeRepo, coord: Cli, worker: Cli, under_lock: list[str]) -> None:
    repo = started(make_repo, coord, worker, "true")
    ok(coord(repo, "assign", "C", "--title", "C", "--expect", "e", "--write", "c.txt:4-5"))
    (repo / "c.txt").write_text("a line above C's range\n" + numbered(5))
    git(repo, "commit", "-q", "-m", "HEAD moves: C's range follows it", "--", "c.txt")
    under_lock.clear()
    ok(worker(repo, "done", "A"))  # with its check
    set_line(repo, "a.txt", 2, "A's second try")
    ok(worker(repo, "done", "A"))  # a new revision while the first is pending
    ok(worker(repo, "blocked", "B", "--reason", "waiting"))
    assert [s for s in under_lock if s != "hold"] == []
    assert under_lock.count("hold") >= 6  # two short holds a delivery
    assert [row["revision"] for row in ok(coord(repo, "inbox"))["reports"]] == [2, 1]
    tasks = {t["id"]: t for t in ok(coord(repo, "status"))["tasks"]}
    assert tasks["C"]["grants"] == ["c.txt:5-6"]


def test_a_done_in_flight_loses_to_a_recovery(make_repo, coord, worker) -> None:
    repo = make_repo({"a.txt": "1\n"})
    # The check outlives the claim (aged past its TTL, as age_claims does), then another
    # session recovers and restarts the task.
    age = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); from pathlib import Path; "
           f"from testing.state import age_claims; age_claims(Path({str(repo)!r}), 'A')")
    check = (f"{shlex.quote(sys.executable)} -c {shlex.quote(age)} && "
             # the coordinator acting meanwhile (coord refuses its commands to the worker)
             f"COORD_SESSION=sess-20260101-0000-coord@box {BIN / 'coord'} recover A "
             f"--repo {repo} >/dev/null && "
             f"{BIN / 'worker'} start A --session {SESS_B} --repo {repo} >/dev/null")
    assign_and_start(coord, worker, repo, "A", "a.txt", lambda: write(repo, "a.txt", "2\n"), check=check,
          session=SESS_A)
    r = worker(repo, "done", "A", session=SESS_A)
    assert r.code == 3, r.stdout + r.stderr
    assert not list((repo / ".git" / "coord" / "inbox" / "new").iterdir())
    tasks = {t["id"]: t for t in coord(repo, "status").doc["tasks"]}
    assert (tasks["A"]["state"], tasks["A"]["session"]) == ("in_progress", SESS_B)
