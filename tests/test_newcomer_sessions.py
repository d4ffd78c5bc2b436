"""Sessions as a newcomer meets them: a deferred worker's heartbeat, `worker ask` without
a session, the freeze's signal, and the session index (its underscores, its file)."""

from __future__ import annotations

from pathlib import Path

from testing.cli import Cli, ok
from testing.repo import MakeRepo, write

S = "sess-20260101-0000-worker@m"


def _running(coord: Cli, worker: Cli, make_repo: MakeRepo, *, session: str = S) -> Path:
    repo = make_repo({"a.txt": "a\n"})
    ok(coord(repo, "assign", "H", "--title", "T", "--expect", "E", "--write", "a.txt"))
    ok(worker(repo, "start", "H", "--session", session))
    write(repo, "a.txt", "edited\n")
    return repo


def test_a_deferred_workers_heartbeat_says_what_happened(coord: Cli, worker: Cli,
                                                        make_repo: MakeRepo) -> None:
    repo = _running(coord, worker, make_repo)
    ok(coord(repo, "freeze", "--defer-running"))
    r = worker(repo, "heartbeat", "H", session=S, json_out=False)
    assert r.code == 0, r
    assert "deferred to batch 2" in r.stdout and "stop editing" in r.stdout
    assert "worker start H after coord thaw" in r.stdout
    doc = ok(worker(repo, "heartbeat", "H", session=S))
    assert doc["deferred"]["batch"] == 2
    # Without a session given: the task's last session.
    assert ok(worker(repo, "heartbeat", "H"))["session"] == S
    # Another session's heartbeat is still refused.
    other = worker(repo, "heartbeat", "H", session="sess-20260101-0000-worker@other")
    assert other.code == 3
    ok(coord(repo, "thaw"))
    assert ok(worker(repo, "start", "H", session=S))["task"]["state"] == "in_progress"


def test_the_freezes_signal_comes_from_the_coordinator(coord: Cli, worker: Cli,
                                                       make_repo: MakeRepo) -> None:
    repo = _running(coord, worker, make_repo)
    ok(coord(repo, "audit", "H", "--roles", "review"))
    ok(coord(repo, "freeze", "--defer-running"))
    sigs = ok(coord(repo, "signals"))["signals"]
    senders = {s["type"]: s["from"] for s in sigs}
    assert senders["BLOCKED_ON"] == senders["READY_FOR_REVIEW"]
    assert senders["BLOCKED_ON"].startswith("coordinator@")


def test_worker_ask_falls_back_to_the_tasks_claim(coord: Cli, worker: Cli,
                                                  make_repo: MakeRepo) -> None:
    repo = _running(coord, worker, make_repo)
    doc = ok(worker(repo, "ask", "H", "--question", "which API?"))
    assert doc["decision"]["session"] == S
    # A task nobody claims: the session is still asked for.
    ok(coord(repo, "assign", "J", "--title", "T", "--expect", "E", "--write", "b.txt"))
    r = worker(repo, "ask", "J", "--question", "q")
    assert r.code == 2 and "no session" in r.doc["error"]["message"]


def test_the_index_keeps_underscores_inside_words(coord: Cli, worker: Cli, make_repo: MakeRepo,
                                                  tmp_path: Path) -> None:
    repo = _running(coord, worker, make_repo)
    ok(coord(repo, "audit", "H", "--roles", "review"))
    ok(worker(repo, "signal", "--to", "*", "--type", "DECISION", "--about", "_x_",
              "--payload", "snake_case and *stars*", session=S))
    out = tmp_path / "INDEX.md"
    r = coord(repo, "index", "--output", str(out), json_out=False)
    assert r.code == 0, r
    text = out.read_text()
    assert "READY_FOR_REVIEW" in text and "snake_case" in text
    assert "\\_x\\_" in text and "\\*stars\\*" in text  # emphasis is still escaped
    # It says where it wrote (stdout stays the Markdown itself).
    assert f"wrote the index to {out}" in r.stderr
    assert r.stdout.startswith("# Session index")
