"""`worker review` prepares its verdict outside the state lock: under it, the state is
checked unchanged, the verdict linked into the inbox and the state saved."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hunkwise.shared.state import store

from testing.cli import Cli, ok
from testing.machines import REVIEWER, built_task, desktop_and_laptop
from testing.repo import MakeRepo, numbered

BUILD = "sess-20260101-0900-build@box"


def audited(make_repo: MakeRepo, coord: Cli, worker: Cli) -> Path:
    repo = make_repo({"f.txt": numbered(5)})
    ok(coord(repo, "assign", "A", "--title", "Greet", "--expect", "hello", "--write", "f.txt"))
    ok(coord(repo, "audit", "A", "--roles", "review"))
    ok(worker(repo, "start", "A", session=BUILD))
    (repo / "f.txt").write_text("line 1\nhello\nline 3\nline 4\nline 5\n")
    ok(worker(repo, "done", "A", session=BUILD))
    return repo


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="names fsynced files by /proc")
def test_a_verdict_holds_the_state_lock_for_the_state_alone(
        make_repo: MakeRepo, coord: Cli, worker: Cli, under_lock: list[str]) -> None:
    repo = audited(make_repo, coord, worker)
    under_lock.clear()
    doc = ok(worker(repo, "review", "A", "--verdict", "approve", "--notes", "fine"))
    assert under_lock.count("hold") == 1
    assert [s for s in under_lock if s != "hold"] == []
    assert doc["audit"] == {"review": "approved"} and Path(doc["file"]).parent.name == "new"
    assert list((repo / ".git" / "coord" / "inbox" / "tmp").iterdir()) == []


def test_a_state_changed_while_the_verdict_was_written_is_read_again(
        make_repo: MakeRepo, coord: Cli, worker: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another command saves the state between the verdict's preparation and its lock: the
    verdict is prepared again from the new state, and what the other command wrote stays."""
    repo = audited(make_repo, coord, worker)
    real_locked = store.locked
    raced: list[str] = []

    def locked(lay: Any, *a: Any, **k: Any) -> Any:
        if not raced and k.get("name", "lock") == "lock" and not a:
            raced.append("x")
            ok(worker(repo, "signal", "--to", "coordinator@*", "--type", "BLOCKED_ON", "--about", "A",
                      "--payload", "meanwhile", session=BUILD))
        return real_locked(lay, *a, **k)

    monkeypatch.setattr(store, "locked", locked)
    doc = ok(worker(repo, "review", "A", "--verdict", "changes", "--notes", "rename"))
    monkeypatch.undo()
    assert raced and doc["audit"] == {"review": "changes"}
    state = json.loads((repo / ".git" / "coord" / "state.json").read_bytes())
    payloads = [s["payload"] for s in state["signals"]]
    assert "meanwhile" in payloads and "review: changes: rename" in payloads
    verdicts = list((repo / ".git" / "coord" / "inbox" / "new").iterdir())
    assert len([v for v in verdicts if '"kind":"review"' in v.read_text()]) == 1
    assert list((repo / ".git" / "coord" / "inbox" / "tmp").iterdir()) == []


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="names fsynced files by /proc")
def test_a_verdict_from_another_machine_is_applied_with_the_state_alone_under_the_lock(
        tmp_path: Path, make_repo: MakeRepo, coord: Cli, worker: Cli,
        under_lock: list[str]) -> None:
    m = desktop_and_laptop(tmp_path, make_repo, coord, worker)
    built_task(m)
    ok(m.coord("desktop", "audit", "task-001", "--roles", "review"))
    ok(m.coord("desktop", "next"))
    ok(m.worker("laptop", "sync"))
    ok(m.worker("laptop", "start", "--role", "review", "--session", REVIEWER))
    ok(m.worker("laptop", "review", "task-001", "--verdict", "approve", "--session", REVIEWER))
    under_lock.clear()
    doc = ok(m.coord("desktop", "sync"))
    assert doc["applied"]["verdicts"] == ["task-001: review approve (laptop)"]
    assert under_lock.count("hold") >= 1
    # The mirror of the other machine's tasks is written with the state it mirrors.
    mirror = [s for s in under_lock if ".mirror.json." in s or s.endswith("/coord/sync")]
    assert [s for s in under_lock if s != "hold" and s not in mirror] == []
    inbox = m.repos["desktop"] / ".git" / "coord" / "inbox"
    assert list((inbox / "tmp").iterdir()) == []
    assert ok(m.coord("desktop", "accept", "task-001"))["paths"] == ["app.py"]


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="names fsynced files by /proc")
def test_no_worker_command_starts_git_or_fsyncs_more_than_the_state_under_the_lock(
        make_repo: MakeRepo, coord: Cli, worker: Cli, under_lock: list[str]) -> None:
    """What the README promises of every worker command: under the state lock, the state
    alone (HEAD may be read through the command's running reader)."""
    repo = make_repo({"a.txt": numbered(9), "b.txt": numbered(9)})
    ok(coord(repo, "assign", "A", "--title", "a", "--expect", "e", "--write", "a.txt:1-4"))
    ok(coord(repo, "assign", "B", "--title", "b", "--expect", "e", "--write", "b.txt"))
    ok(coord(repo, "audit", "A", "--roles", "review"))
    slow: dict[str, list[str]] = {}

    def run(*args: str, session: str | None = None) -> Any:
        under_lock.clear()
        doc = ok(worker(repo, *args, session=session))
        assert "hold" in under_lock, args
        found = [s for s in under_lock if s != "hold" and s != "git read ['HEAD']"]
        if found:
            slow[" ".join(args[:2])] = found
        return doc

    s = run("start", "A")["session"]
    run("start", "B", session=BUILD)
    (repo / "a.txt").write_text(numbered(9).replace("line 2\n", "A's line\n"))
    (repo / "b.txt").write_text(numbered(9).replace("line 5\n", "B's line\n"))
    run("heartbeat", "A", session=s)
    run("checkpoint", "B", "--next", "resume b.txt at ## B — context: half done", session=BUILD)
    run("signal", "--to", "coordinator@*", "--type", "BLOCKED_ON", "--about", "A",
        session=s)
    run("ask", "A", "--question", "which name?", session=s)
    run("handoff", "B", "--to", "sess-20260101-0930-build@box", "--next",
        "resume b.txt at ## B — context: over to you", session=BUILD)
    run("done", "A", session=s)
    run("review", "A", "--verdict", "approve")
    assert slow == {}
