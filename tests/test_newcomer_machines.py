"""A machine may publish only the tasks it coordinates."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from testing.cli import Cli, ok
from testing.machines import Machines, built_task, desktop_and_laptop
from testing.repo import MakeRepo, git


def _publish_table(repo: Path, machine: str, tasks: list[dict]) -> None:  # type: ignore[type-arg]
    """A task table under `machine`'s ref, as a clone with a lost mirror (or a hostile
    one) publishes it."""
    data = json.dumps({"machine": machine, "ranges_at": None, "tasks": tasks}).encode()
    oid = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo, input=data,
                         capture_output=True, check=True).stdout.decode().strip()
    top = git(repo, "mktree", input=f"100644 blob {oid}\ttasks.json\n".encode()).strip()
    commit = git(repo, "commit-tree", top, "-m", "table").strip()
    git(repo, "push", "-q", "-f", "origin", f"{commit}:refs/hunkwise/m/{machine}/records")


def _state_task(repo: Path, task_id: str) -> dict:  # type: ignore[type-arg]
    state = json.loads((repo / ".git" / "coord" / "state.json").read_text())
    return dict(state["tasks"][task_id])


def test_another_machines_copy_of_a_local_task_is_refused(tmp_path: Path, make_repo: MakeRepo,
                                                          coord: Cli, worker: Cli) -> None:
    m: Machines = desktop_and_laptop(tmp_path, make_repo, coord, worker)
    built_task(m)
    desk = m.repos["desktop"]
    mine = _state_task(desk, "task-001")
    ok(m.coord("desktop", "accept", "task-001"))
    ok(m.coord("desktop", "freeze"))
    ok(m.coord("desktop", "thaw"))  # task-001 moves to the desktop's archive
    # The laptop publishes task-001 as its own (still in progress there).
    _publish_table(m.repos["laptop"], "laptop", [dict(mine, claim=None, state="assigned")])
    doc = ok(m.coord("desktop", "sync"))
    q = doc["applied"]["quarantined"]
    assert [x["record"] for x in q] == ["tasks.json/task-001"]
    assert "which desktop coordinates" in q[0]["reason"]
    assert doc["applied"]["tasks"] == []
    status = ok(m.coord("desktop", "status", "--all"))
    row = next(t for t in status["tasks"] if t["id"] == "task-001")
    assert row["state"] == "accepted" and row["coordinator"] == "desktop"
    assert ok(m.coord("desktop", "status"))["tasks"] == []  # not brought back as a mirror


def test_a_local_reject_stays_rejected(tmp_path: Path, make_repo: MakeRepo, coord: Cli,
                                       worker: Cli) -> None:
    m: Machines = desktop_and_laptop(tmp_path, make_repo, coord, worker)
    built_task(m)
    mine = _state_task(m.repos["desktop"], "task-001")
    ok(m.coord("desktop", "reject", "task-001", "--note", "no"))
    _publish_table(m.repos["laptop"], "laptop", [dict(mine, state="in_progress")])
    doc = ok(m.coord("desktop", "sync"))
    assert [x["record"] for x in doc["applied"]["quarantined"]] == ["tasks.json/task-001"]
    assert ok(m.coord("desktop", "status", "--all"))["tasks"][0]["state"] == "rejected"
    ok(m.coord("desktop", "sync"))
    assert ok(m.coord("desktop", "status", "--all"))["tasks"][0]["state"] == "rejected"
