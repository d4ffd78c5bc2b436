"""A task handed over to another machine with its uncommitted edits, and back: a bare
repository is the remote, clones are the machines (HUNKWISE_MACHINE per clone)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from testing.cli import ok
from testing.machines import BUILDER, Machines, desktop_and_laptop
from testing.repo import git, numbered, set_line
from testing.state import age_claims

LAPTOP = "sess-20260101-1800-build@laptop"
OTHER = "sess-20260101-0901-build@desktop"


def text(*changes: tuple[int, str], n: int = 20) -> bytes:
    rows = numbered(n).split("\n")
    for i, t in changes:
        rows[i - 1] = t
    return "\n".join(rows).encode()


@pytest.fixture
def handed(tmp_path: Path, make_repo: Callable[..., Path], coord: Any, worker: Any) -> Machines:
    """task-001 (app.py:1-5) edited on the desktop (line 2) and handed to build@laptop;
    task-002 (app.py:10-15) is another desktop task."""
    m = desktop_and_laptop(tmp_path, make_repo, coord, worker)
    ok(m.coord("desktop", "assign", "task-001", "--title", "Greet", "--expect", "hello world",
               "--write", "app.py:1-5"))
    ok(m.coord("desktop", "assign", "task-002", "--title", "Other", "--expect", "x",
               "--write", "app.py:10-15"))
    ok(m.worker("desktop", "start", "task-001", "--session", BUILDER))
    set_line(m.repos["desktop"], "app.py", 2, "hello")
    doc = ok(m.worker("desktop", "handoff", "task-001", "--to", "build@laptop", "--session",
                      BUILDER, "--next", "resume app.py at line 3 - context: say world"))
    assert doc["handoff"]["saved"]["hunks"] == {"app.py": [[2, 1, doc["handoff"]["saved"]["hunks"]["app.py"][0][2]]]}
    return m


@pytest.mark.slow
def test_handoff_round_trip_ends_in_an_exact_commit(handed: Machines) -> None:
    m = handed
    desk, lap = m.repos["desktop"], m.repos["laptop"]
    # The laptop takes it: exactly the desktop's change comes into its tree.
    doc = ok(m.worker("laptop", "start", "task-001", "--session", LAPTOP))
    assert doc["placed"] == ["app.py"] and doc["checkpoint"]["kind"] == "handoff"
    assert (lap / "app.py").read_bytes() == text((2, "hello"))
    assert git(lap, "status", "--porcelain") == " M app.py\n"
    # The coordinator sees the laptop's claim.
    ok(m.coord("desktop", "sync"))
    row = next(t for t in ok(m.coord("desktop", "status"))["tasks"] if t["id"] == "task-001")
    assert row["state"] == "in_progress" and row["session"] == LAPTOP and row["machine"] == "laptop"
    # Meanwhile on the desktop another task edits its own lines of the same file.
    ok(m.worker("desktop", "start", "task-002", "--session", OTHER))
    set_line(desk, "app.py", 12, "other")
    # Work continues on the laptop; its report travels back.
    set_line(lap, "app.py", 3, "world")
    ok(m.worker("laptop", "done", "task-001", "--session", LAPTOP, "--commit-message", "Greet"))
    assert (lap / "app.py").read_bytes() == text((2, "hello"), (3, "world"))
    nxt = ok(m.coord("desktop", "next"))
    assert nxt["next"]["report"]["session"] == LAPTOP
    assert nxt["next"]["validation"]["ok"], nxt["next"]["validation"]
    # The desktop's copy was replaced, not doubled; the other task's line is kept.
    assert (desk / "app.py").read_bytes() == text((2, "hello"), (3, "world"), (12, "other"))
    acc = ok(m.coord("desktop", "accept", "task-001"))
    assert acc["paths"] == ["app.py"]
    committed = subprocess_bytes(desk, "show", "HEAD:app.py")
    assert committed == text((2, "hello"), (3, "world"))
    assert (desk / "app.py").read_bytes() == text((2, "hello"), (3, "world"), (12, "other"))
    assert git(desk, "diff", "--name-only", "HEAD~1", "HEAD").split() == ["app.py"]
    # The laptop learns the outcome at its next sync after the coordinator's.
    ok(m.coord("desktop", "sync"))
    ok(m.worker("laptop", "sync"))
    row = next(t for t in ok(m.coord("laptop", "status"))["tasks"] if t["id"] == "task-001")
    assert row["state"] == "accepted"


def subprocess_bytes(repo: Path, *args: str) -> bytes:
    import subprocess

    return subprocess.run(["git", *args], cwd=repo, capture_output=True, check=True).stdout


def test_the_laptop_refuses_to_take_over_where_its_lines_differ(handed: Machines) -> None:
    m = handed
    lap = m.repos["laptop"]
    set_line(lap, "app.py", 2, "the laptop's own line")
    before = (lap / "app.py").read_bytes()
    r = m.worker("laptop", "start", "task-001", "--session", LAPTOP)
    assert r.code == 3, r.stdout
    msg = r.doc["error"]["message"]
    assert "app.py: lines 2-2 differ here from the base" in msg and "nothing was written" in msg
    assert (lap / "app.py").read_bytes() == before
    row = next(t for t in ok(m.coord("laptop", "status"))["tasks"] if t["id"] == "task-001")
    assert row["state"] == "assigned" and row["session"] != LAPTOP
    # Once the laptop's line is back, the start goes through.
    set_line(lap, "app.py", 2, "line 2")
    ok(m.worker("laptop", "start", "task-001", "--session", LAPTOP))
    assert (lap / "app.py").read_bytes() == text((2, "hello"))


def test_a_change_to_lines_the_desktop_changed_meanwhile_is_refused(handed: Machines) -> None:
    m = handed
    desk, lap = m.repos["desktop"], m.repos["laptop"]
    ok(m.worker("laptop", "start", "task-001", "--session", LAPTOP))
    set_line(lap, "app.py", 3, "world")
    ok(m.worker("laptop", "done", "task-001", "--session", LAPTOP, "--commit-message", "Greet"))
    # Someone on the desktop changed the task's line 3 after the handover.
    set_line(desk, "app.py", 3, "desktop's three")
    desk_before = (desk / "app.py").read_bytes()
    r = m.coord("desktop", "next")
    assert r.code == 3, r.stdout
    msg = r.doc["error"]["message"]
    assert "app.py: lines 3-3 were changed in this tree since the handover" in msg
    assert "nothing was written" in msg
    # Nothing lost on either side: both trees as they were, the report still pending.
    assert (desk / "app.py").read_bytes() == desk_before
    assert (lap / "app.py").read_bytes() == text((2, "hello"), (3, "world"))
    assert [x["task_id"] for x in ok(m.coord("desktop", "inbox"))["reports"]] == ["task-001"]
    # Once the desktop's line is settled, the report comes in and is accepted exactly.
    set_line(desk, "app.py", 3, "line 3")
    nxt = ok(m.coord("desktop", "next"))
    assert nxt["next"]["validation"]["ok"]
    ok(m.coord("desktop", "accept", "task-001"))
    assert subprocess_bytes(desk, "show", "HEAD:app.py") == text((2, "hello"), (3, "world"))


def test_status_and_index_show_other_machines_claims(handed: Machines) -> None:
    m = handed
    ok(m.worker("desktop", "start", "task-002", "--session", OTHER))
    ok(m.worker("laptop", "start", "task-001", "--session", LAPTOP))
    ok(m.coord("desktop", "sync"))
    rows = {t["id"]: t for t in ok(m.coord("desktop", "status"))["tasks"]}
    assert (rows["task-001"]["session"], rows["task-001"]["machine"],
            rows["task-001"]["stale"]) == (LAPTOP, "laptop", False)
    assert rows["task-002"]["machine"] == "desktop"
    # The laptop's session stops beating: its claim goes stale on the laptop, and the
    # coordinator sees it stale after the next syncs of both.
    age_claims(m.repos["laptop"], "task-001")
    ok(m.worker("laptop", "sync"))
    ok(m.coord("desktop", "sync"))
    rows = {t["id"]: t for t in ok(m.coord("desktop", "status"))["tasks"]}
    assert rows["task-001"]["stale"] and rows["task-001"]["machine"] == "laptop"
    md = ok(m.coord("desktop", "index"))["markdown"]
    stale = md.split("## Stale claims")[1].split("## Signals")[0]
    active = md.split("## Active claims")[1].split("## Stale claims")[0]
    assert "build@laptop | laptop | task-001" in stale
    assert "build@desktop | desktop | task-002" in active
    signals = md.split("## Signals")[1]
    assert "HANDOFF" not in signals  # taken on the laptop: closed
    # And the laptop sees the desktop's claims from the coordinator's table.
    ok(m.worker("laptop", "sync"))
    rows = {t["id"]: t for t in ok(m.coord("laptop", "status"))["tasks"]}
    assert (rows["task-002"]["session"], rows["task-002"]["machine"],
            rows["task-002"]["coordinator"]) == (OTHER, "desktop", "desktop")
    lap_md = ok(m.coord("laptop", "index"))["markdown"]
    assert "build@desktop | desktop | task-002" in lap_md


def test_a_new_file_travels_both_ways_and_is_committed_exactly(
        tmp_path: Path, make_repo: Callable[..., Path], coord: Any, worker: Any) -> None:
    m = Machines(tmp_path, make_repo, coord, worker)
    desk, lap = m.clone("desktop"), m.clone("laptop")
    ok(m.coord("desktop", "assign", "task-001", "--title", "Module", "--expect", "lib/new.py",
               "--write", "lib/*.py"))
    ok(m.worker("desktop", "start", "task-001", "--session", BUILDER))
    (desk / "lib").mkdir()
    (desk / "lib" / "new.py").write_bytes(b"a = 1\n")
    ok(m.worker("desktop", "handoff", "task-001", "--to", "build@laptop", "--session", BUILDER,
                "--next", "finish lib/new.py"))
    assert ok(m.worker("laptop", "start", "task-001", "--session", LAPTOP))["placed"] == [
        "lib/new.py"]
    assert (lap / "lib" / "new.py").read_bytes() == b"a = 1\n"
    (lap / "lib" / "new.py").write_bytes(b"a = 1\nb = 2\n")
    ok(m.worker("laptop", "done", "task-001", "--session", LAPTOP, "--commit-message", "Module"))
    nxt = ok(m.coord("desktop", "next"))
    assert nxt["next"]["validation"]["ok"], nxt
    assert (desk / "lib" / "new.py").read_bytes() == b"a = 1\nb = 2\n"
    ok(m.coord("desktop", "accept", "task-001"))
    assert subprocess_bytes(desk, "show", "HEAD:lib/new.py") == b"a = 1\nb = 2\n"
    assert git(desk, "status", "--porcelain") == ""


def test_a_checkpoint_travels_with_its_edits(handed: Machines) -> None:
    m = handed
    lap = m.repos["laptop"]
    ok(m.worker("laptop", "start", "task-001", "--session", LAPTOP))
    set_line(lap, "app.py", 4, "four")
    ok(m.worker("laptop", "checkpoint", "task-001", "--session", LAPTOP, "--next",
                "resume app.py at line 5"))
    ok(m.worker("laptop", "sync"))
    doc = ok(m.coord("desktop", "sync"))
    assert f"{LAPTOP}|task-001" in doc["applied"]["checkpoints"]
    from hunkwise.shared.state import store
    from hunkwise.shared.state.context import open_repo

    cp = store.load(open_repo(str(m.repos["desktop"])).lay).checkpoints[f"{LAPTOP}|task-001"]
    assert cp.saved is not None and sorted(cp.saved.hunks) == ["app.py"]
    # Its trees came along: the desktop can show the laptop's diff at that checkpoint.
    patch = git(m.repos["desktop"], "diff", cp.saved.base or "", cp.saved.tree, "--", "app.py")
    assert "+hello" in patch and "+four" in patch


def test_a_claim_the_coordinator_never_granted_is_not_taken(handed: Machines) -> None:
    m = handed
    # Reserved for build@laptop: a review session of the laptop cannot take it.
    r = m.worker("laptop", "start", "task-001", "--session", "sess-20260101-1800-review@laptop")
    assert r.code == 3 and "handed off to build@laptop" in r.doc["error"]["message"]
    assert not (m.repos["laptop"] / "app.py").read_bytes().startswith(b"line 1\nhello")
    # A desktop session starts task-002; the laptop's copy cannot take over that live claim.
    ok(m.worker("desktop", "start", "task-002", "--session", OTHER))
    ok(m.coord("desktop", "sync"))
    ok(m.worker("laptop", "sync"))
    r = m.worker("laptop", "start", "task-002", "--session", LAPTOP)
    assert r.code == 3 and "live session" in r.doc["error"]["message"]


def test_forged_claims_are_quarantined_or_ignored(handed: Machines) -> None:
    import json
    import subprocess

    m = handed
    lap = m.repos["laptop"]
    ok(m.worker("desktop", "start", "task-002", "--session", OTHER))
    ok(m.coord("desktop", "sync"))

    def rec(task: str, session: str) -> bytes:
        return json.dumps({"task": task, "session": session, "state": "in_progress",
                           "revision": 0, "opened": 1.0, "heartbeat": 9e9, "ttl": 1800}).encode()

    claims = {"task-002": rec("task-002", LAPTOP),                # a live desktop claim
              "task-001": rec("task-001", BUILDER)}               # a desktop session
    entries = ""
    for name, data in claims.items():
        oid = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=lap, input=data,
                             capture_output=True, check=True).stdout.decode().strip()
        entries += f"100644 blob {oid}\t{name}\n"
    sub = git(lap, "mktree", input=entries.encode()).strip()
    top = git(lap, "mktree", input=f"040000 tree {sub}\tclaims\n".encode()).strip()
    commit = git(lap, "commit-tree", top, "-m", "forged").strip()
    git(lap, "push", "-q", "origin", f"{commit}:refs/hunkwise/m/laptop/records")
    doc = ok(m.coord("desktop", "sync"))
    assert doc["applied"]["claims"] == []
    q = {x["record"]: x["reason"] for x in doc["applied"]["quarantined"]}
    assert "is not on laptop" in q["claims/task-001"]
    rows = {t["id"]: t for t in ok(m.coord("desktop", "status"))["tasks"]}
    assert rows["task-002"]["session"] == OTHER
    assert rows["task-001"]["state"] == "assigned"


def test_handed_there_and_back_then_accepted_exactly(handed: Machines) -> None:
    m = handed
    desk, lap = m.repos["desktop"], m.repos["laptop"]
    ok(m.worker("laptop", "start", "task-001", "--session", LAPTOP))
    set_line(lap, "app.py", 3, "world")
    ok(m.worker("laptop", "handoff", "task-001", "--to", "build@desktop", "--session", LAPTOP,
                "--next", "resume app.py at line 4"))
    # Meanwhile another desktop task edits its own lines of the same file.
    ok(m.worker("desktop", "start", "task-002", "--session", OTHER))
    set_line(desk, "app.py", 12, "other")
    back = "sess-20260102-0900-build@desktop"
    doc = ok(m.worker("desktop", "start", "task-001", "--session", back))
    assert doc["placed"] == ["app.py"] and doc["checkpoint"]["session"] == LAPTOP
    # The laptop's version replaced the desktop's copy: each line once.
    assert (desk / "app.py").read_bytes() == text((2, "hello"), (3, "world"), (12, "other"))
    set_line(desk, "app.py", 4, "again")
    ok(m.worker("desktop", "done", "task-001", "--session", back, "--commit-message", "Greet"))
    nxt = ok(m.coord("desktop", "next"))
    assert nxt["next"]["validation"]["ok"], nxt
    ok(m.coord("desktop", "accept", "task-001"))
    assert subprocess_bytes(desk, "show", "HEAD:app.py") == text((2, "hello"), (3, "world"),
                                                                 (4, "again"))
    assert (desk / "app.py").read_bytes() == text((2, "hello"), (3, "world"), (4, "again"),
                                                  (12, "other"))


def test_changes_requested_of_the_laptop_come_back_as_a_second_revision(handed: Machines) -> None:
    m = handed
    desk, lap = m.repos["desktop"], m.repos["laptop"]
    ok(m.worker("laptop", "start", "task-001", "--session", LAPTOP))
    set_line(lap, "app.py", 3, "world")
    ok(m.worker("laptop", "done", "task-001", "--session", LAPTOP, "--commit-message", "Greet"))
    ok(m.coord("desktop", "next"))
    ok(m.coord("desktop", "request-changes", "task-001", "--note", "line 4 too"))
    ok(m.coord("desktop", "sync"))
    doc = ok(m.worker("laptop", "start", "task-001", "--session", LAPTOP))
    assert doc["task"]["state"] == "in_progress"
    set_line(lap, "app.py", 3, "world!")
    set_line(lap, "app.py", 4, "four")
    ok(m.worker("laptop", "done", "task-001", "--session", LAPTOP, "--commit-message", "Greet"))
    nxt = ok(m.coord("desktop", "next"))
    assert nxt["next"]["report"]["revision"] == 2 and nxt["next"]["validation"]["ok"], nxt
    assert (desk / "app.py").read_bytes() == text((2, "hello"), (3, "world!"), (4, "four"))
    ok(m.coord("desktop", "accept", "task-001"))
    assert subprocess_bytes(desk, "show", "HEAD:app.py") == text((2, "hello"), (3, "world!"),
                                                                 (4, "four"))
