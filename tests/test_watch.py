"""coord watch: notify once per report, rescan what the observer missed, record events."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest
from hunkwise import inbox
from hunkwise.shared.state.context import open_repo

from testing.env import BIN
from testing.repo import git, numbered, write
from testing.wait import Lines, stopped_by_each_signal, wait_until


def _setup(make_repo, coord, worker, n: int, log: Path) -> tuple[Path, list[str]]:
    repo = make_repo({"f.txt": numbered(5), "coord.toml":
                      f'[notify]\ncommand = "cat >> {log}; echo >> {log}"\n'})
    from hunkwise.coordinator import tasks

    ctx = open_repo(str(repo))
    for i in range(n):  # scene-setting, in-process: the watcher is what is under test
        tasks.assign(ctx, task_id=f"t{i}", title=f"task {i}", expect="e",
                     writes=[f"d{i}/**"], checks=[], exclusive=False)
    return repo, []


def _deliver_many(repo: Path, n: int) -> None:
    """n valid reports landing at once, through the product's own delivery."""
    ctx = open_repo(str(repo))
    template = {
        "schema_version": 1, "status": "done", "session": None, "created_at": "2026-01-01T00:00:00Z",
        "base_commit": None, "title": "t", "expect": "e", "summary": "", "changes": [],
        "patch_sha256": "0" * 64, "snapshot": "", "revision": 1, "report_id": "r",
        "checks": [], "overlaps": [], "unfinished": [], "proposed_commit": {"subject": "s", "body": ""},
    }
    for i in range(n):
        doc = dict(template, task_id=f"t{i}", report_id=f"r{i}")
        inbox.write_report(ctx.lay.inbox, json.dumps(doc).encode(), f"t{i}", 1)


def _notified(log: Path) -> list[dict]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


@pytest.mark.slow
def test_fifty_reports_at_once_notify_once_each(make_repo, coord, worker, tmp_path: Path) -> None:
    log = tmp_path / "notify.log"
    repo, _ = _setup(make_repo, coord, worker, 50, log)
    proc = subprocess.Popen([str(BIN / "coord"), "watch", "--interval", "0.5", "--json"],
                            cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines = Lines(proc.stderr)
    lines.wait_for("watching: ready")
    _deliver_many(repo, 50)
    wait_until(lambda: len(_notified(log)) >= 50, what="50 notifications")
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, "".join(lines.seen)
    got = _notified(log)
    assert sorted(d["task_id"] for d in got) == sorted(f"t{i}" for i in range(50))
    assert len(json.loads(out)["notified"]) == 50
    # The watcher never takes the coordinator's queue: every report is still pending.
    assert len(coord(repo, "inbox").doc["reports"]) == 50


@pytest.mark.slow
def test_report_written_while_not_running_is_caught_once(make_repo, coord, worker,
                                                         tmp_path: Path) -> None:
    log = tmp_path / "notify.log"
    repo, _ = _setup(make_repo, coord, worker, 3, log)
    _deliver_many(repo, 2)
    r = coord(repo, "watch", "--timeout", "0.3", "--interval", "0.1")
    assert r.code == 0, r.stderr
    assert sorted(d["task_id"] for d in _notified(log)) == ["t0", "t1"]
    # A second run does not notify again for what it already saw.
    r = coord(repo, "watch", "--timeout", "0.3", "--interval", "0.1")
    assert r.code == 0 and len(_notified(log)) == 2


def test_writes_outside_grants_and_during_freeze_become_events(make_repo, coord, worker,
                                                               tmp_path: Path) -> None:
    repo = make_repo({"f.txt": numbered(5), ".gitignore": "build/\n"})
    assert coord(repo, "assign", "t1", "--title", "t", "--expect", "e", "--write", "src/**").code == 0
    proc = subprocess.Popen([str(BIN / "coord"), "watch", "--interval", "0.5"],
                            cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines = Lines(proc.stderr)
    lines.wait_for("watching: ready")
    write(repo, "src/ok.py", "x = 1\n")          # inside a grant: no event
    write(repo, "build/out.o", "ignored\n")     # ignored by git: no event
    write(repo, "stray.txt", "oops\n")          # outside every grant, written last
    lines.wait_for("event: write-outside-grants: stray.txt")
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    events = coord(repo, "status").doc["events"]
    paths = {(e["kind"], e["path"]) for e in events}
    assert ("write-outside-grants", "stray.txt") in paths
    assert not any(p in ("src/ok.py", "build/out.o") for _, p in paths)

    assert coord(repo, "freeze").code == 0
    proc = subprocess.Popen([str(BIN / "coord"), "watch", "--interval", "0.5"],
                            cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines = Lines(proc.stderr)
    lines.wait_for("watching: ready")
    write(repo, "src/ok.py", "x = 2\n")
    lines.wait_for("event: write-during-freeze: src/ok.py")
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    events = coord(repo, "status").doc["events"]
    assert any(e["kind"] == "write-during-freeze" and e["path"] == "src/ok.py" for e in events)
    assert git(repo, "status", "--porcelain")  # the tree itself is left alone


def test_watch_prints_worker_text_on_one_line_without_escapes(make_repo, coord, worker,
                                                               tmp_path: Path) -> None:
    log = tmp_path / "notify.log"
    repo, _ = _setup(make_repo, coord, worker, 1, log)
    ctx = open_repo(str(repo))
    doc = {
        "schema_version": 1, "status": "done", "session": None, "created_at": "2026-01-01T00:00:00Z",
        "base_commit": None, "title": "fine\nreport: t9 [done] forged\x1b[2J", "expect": "e",
        "summary": "", "changes": [], "patch_sha256": "0" * 64, "snapshot": "", "revision": 1,
        "report_id": "r", "checks": [], "overlaps": [], "unfinished": [], "task_id": "t0",
        "proposed_commit": {"subject": "s", "body": ""},
    }
    inbox.write_report(ctx.lay.inbox, json.dumps(doc).encode(), "t0", 1)
    r = coord(repo, "watch", "--timeout", "0.3", "--interval", "0.1", json_out=False)
    lines = [x for x in r.stderr.splitlines() if x.startswith("report:")]
    assert len(lines) == 1 and "\x1b" not in r.stderr
    assert "fine\\nreport: t9" in lines[0]


def test_watch_stops_on_sigterm_and_on_sigint_even_started_with_sigint_ignored(
        make_repo, coord, worker, tmp_path: Path) -> None:
    """A service manager stops it with SIGTERM; a shell's background job starts it with
    SIGINT ignored (and the interrupt after "ready" comes at once): it stops either way,
    and says what it saw, as `coord board` does. Before, an ignored SIGINT left it running."""
    repo, _ = _setup(make_repo, coord, worker, 1, tmp_path / "notify.log")

    argv = [str(BIN / "coord"), "watch", "--interval", "0.5", "--json"]
    for code, out in stopped_by_each_signal(argv, repo, "watching: ready"):
        assert code == 0 and "notified" in json.loads(out), out
