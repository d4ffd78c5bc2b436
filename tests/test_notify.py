"""What needs the supervisor is notified once each, across watcher restarts; a failing
notifier is retried with backoff and recorded, never fatal; apprise delivers to a local
HTTP endpoint standing in for the service; `coord status --brief` fits a phone."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hunkwise.shared.state.context import open_repo

from testing.cli import Cli, ok_doc_or_text
from testing.env import BIN
from testing.repo import git, numbered, write
from testing.state import age_claims
from testing.wait import Lines, wait_until

A = "sess-20260101-0900-worker@box-a"
B = "sess-20260101-0901-worker@box-b"
C = "sess-20260101-0902-worker@box-c"


def lines_of(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(x) for x in log.read_text().splitlines() if x.strip()]


def events_file(repo: Path) -> list[dict[str, Any]]:
    p = open_repo(str(repo)).lay.root / "events.jsonl"
    return [json.loads(x) for x in p.read_text().splitlines()] if p.exists() else []


def repo_with(make_repo: Callable[..., Path], notify: str, **extra: str) -> Path:
    files: dict[str, str | bytes] = {"f.txt": numbered(10), "g.txt": numbered(10, "g"),
                                     "coord.toml": "[verify]\ncommands = [\"true\"]\n"
                                     f"[notify]\n{notify}\n"}
    files.update(extra)
    return make_repo(files)


def watch_once(coord: Cli, repo: Path) -> dict[str, Any]:
    doc = ok_doc_or_text(coord(repo, "watch", "--timeout", "0.3", "--interval", "0.1"))
    assert isinstance(doc, dict)
    return doc


# ---- once each, across restarts ----------------------------------------------------------------

@pytest.mark.slow
def test_each_event_is_notified_once_across_watcher_restarts(make_repo, coord: Cli, worker: Cli,
                                                            tmp_path: Path) -> None:
    log = tmp_path / "log"
    repo = repo_with(make_repo, f'command = "cat >> {log}; echo >> {log}"')
    for tid, grant in (("t1", "f.txt:1-3"), ("t2", "f.txt:5-6"), ("t3", "g.txt")):
        ok_doc_or_text(coord(repo, "assign", tid, "--title", f"title {tid}", "--expect", "e", "--write", grant))
    ok_doc_or_text(worker(repo, "start", "t1", session=A))
    ok_doc_or_text(worker(repo, "start", "t2", session=B))
    ok_doc_or_text(worker(repo, "start", "t3", session=C))
    age_claims(repo, "t1")
    ok_doc_or_text(worker(repo, "ask", "t2", "--question", "Ship the beta on Friday?", "--kind", "deploy",
              session=B))
    ok_doc_or_text(worker(repo, "blocked", "t3", "--reason", "needs the schema of t9", session=C))
    ok_doc_or_text(worker(repo, "signal", "--to", "coordinator@*", "--type", "BLOCKED_ON", "--about", "t2",
              "--payload", "waiting on the API key", session=B))

    watch_once(coord, repo)
    got = lines_of(log)
    kinds = sorted(d["event"] for d in got)
    assert kinds == ["blocked", "blocked-on", "decision", "stale-claim"], got
    by = {d["event"]: d for d in got}
    assert by["decision"]["question"] == "Ship the beta on Friday?" and by["decision"]["kind"] == "deploy"
    assert by["stale-claim"]["task_id"] == "t1" and by["stale-claim"]["session"] == A
    assert by["blocked"]["task_id"] == "t3" and by["blocked"]["status"] == "blocked"
    assert "needs the schema of t9" in by["blocked"]["subject"]
    assert by["blocked-on"]["payload"] == "waiting on the API key"

    # A restart: nothing again, though every fact still holds.
    watch_once(coord, repo)
    assert len(lines_of(log)) == 4

    # Freeze, verify, thaw: each once, with the verify's result.
    ok_doc_or_text(worker(repo, "heartbeat", "t1", session=A))
    ok_doc_or_text(coord(repo, "freeze", "--defer-running"))
    ok_doc_or_text(coord(repo, "verify"))
    watch_once(coord, repo)
    ok_doc_or_text(coord(repo, "thaw"))
    watch_once(coord, repo)
    watch_once(coord, repo)
    got = lines_of(log)
    new = [d["event"] for d in got[4:]]
    assert sorted(new) == ["freeze", "thaw", "verify"], new
    verify = next(d for d in got if d["event"] == "verify")
    assert verify["ok"] is True and "passed" in verify["subject"]
    ids = [d["id"] for d in got]
    assert len(ids) == len(set(ids))


def test_a_failing_verify_names_the_failing_command(make_repo, coord: Cli, tmp_path: Path) -> None:
    log = tmp_path / "log"
    repo = make_repo({"f.txt": "x\n", "coord.toml":
                      f'[verify]\ncommands = ["true", "exit 3"]\n[notify]\ncommand = "cat >> {log}; echo >> {log}"\n'})
    watch_once(coord, repo)  # the outbox exists: what follows is news
    ok_doc_or_text(coord(repo, "freeze"))
    assert coord(repo, "verify").code == 1
    watch_once(coord, repo)
    verify = [d for d in lines_of(log) if d["event"] == "verify"]
    assert len(verify) == 1 and verify[0]["ok"] is False
    assert verify[0]["failing"] == ["exit 3"] and "'exit 3' failed" in verify[0]["subject"]


def test_history_before_the_first_watch_is_not_announced(make_repo, coord: Cli, tmp_path: Path) -> None:
    log = tmp_path / "log"
    repo = repo_with(make_repo, f'command = "cat >> {log}; echo >> {log}"')
    ok_doc_or_text(coord(repo, "freeze"))
    ok_doc_or_text(coord(repo, "verify"))
    ok_doc_or_text(coord(repo, "thaw"))
    ok_doc_or_text(coord(repo, "freeze"))
    watch_once(coord, repo)
    assert lines_of(log) == []  # an old thaw, an old verify, a freeze in force: known facts
    ok_doc_or_text(coord(repo, "thaw"))
    watch_once(coord, repo)
    assert [d["event"] for d in lines_of(log)] == ["thaw"]


def test_lost_work_is_an_event(make_repo, coord: Cli, worker: Cli, tmp_path: Path) -> None:
    from hunkwise.coordinator import notify

    repo = repo_with(make_repo, "")
    ok_doc_or_text(coord(repo, "assign", "t1", "--title", "t", "--expect", "e", "--write", "f.txt:1-3"))
    ok_doc_or_text(worker(repo, "start", "t1", session=A))
    write(repo, "f.txt", numbered(10).replace("line 2\n", "line two\n"))
    ok_doc_or_text(worker(repo, "done", "t1", "--no-run-checks", session=A))
    ctx = open_repo(str(repo))
    assert [e for e in notify.collect(ctx, with_lost=True) if e["event"] == "lost"] == []
    git(repo, "checkout", "--", "f.txt")  # a whole-tree command wipes the work
    lost = [e for e in notify.collect(ctx, with_lost=True) if e["event"] == "lost"]
    assert len(lost) == 1 and lost[0]["task_id"] == "t1" and lost[0]["paths"] == ["f.txt"]
    assert "coord restore t1" in lost[0]["body"]
    again = [e for e in notify.collect(ctx, with_lost=True) if e["event"] == "lost"]
    assert [e["id"] for e in again] == [lost[0]["id"]]  # the same fact, the same id


# ---- failures: retried with backoff, recorded, never fatal --------------------------------------

def test_backoff_doubles_and_gives_up_recorded(make_repo, tmp_path: Path) -> None:
    from hunkwise.coordinator import notify

    count = tmp_path / "count"
    repo = make_repo({"coord.toml": "[notify]\n"
                      f'command = "echo x >> {count}; echo boom; exit 7"\n'
                      "retry_seconds = 10\nmax_attempts = 3\n"})
    ctx = open_repo(str(repo))
    n = notify.Notifier(ctx)
    ev = notify.event("decision", "decision:dec-1", "decision waiting: dec-1")
    assert n.offer([ev]) == [ev]
    assert n.offer([ev]) == []  # taken once
    t0 = 1_000_000.0
    n.deliver_due(now=t0)
    attempts = lambda: len(count.read_text().splitlines())  # noqa: E731
    assert attempts() == 1
    assert n.next_due() == t0 + 10
    n.deliver_due(now=t0 + 9)
    assert attempts() == 1  # not due yet
    n.deliver_due(now=t0 + 10)
    assert attempts() == 2 and n.next_due() == t0 + 10 + 20  # doubled
    n.deliver_due(now=t0 + 30)
    assert attempts() == 3 and n.pending() == {}
    kinds = [(e["kind"], e["path"]) for e in events_file(repo)]
    assert kinds == [("notify-failed", "decision:dec-1")] * 2 + [("notify-gave-up", "decision:dec-1")]
    assert "exit 7: boom" in events_file(repo)[0]["detail"]
    # Given up is final: a restart does not send it again.
    assert notify.Notifier(ctx).offer([ev]) == []


def test_a_failing_notifier_is_retried_and_the_watcher_goes_on(make_repo, coord: Cli, worker: Cli,
                                                              tmp_path: Path) -> None:
    log, count = tmp_path / "log", tmp_path / "count"
    # Fails twice, then delivers.
    cmd = (f'echo x >> {count}; [ $(wc -l < {count}) -ge 3 ] || exit 9; '
           f'cat >> {log}; echo >> {log}')
    repo = repo_with(make_repo, f"command = {json.dumps(cmd)}\nretry_seconds = 0.05")
    ok_doc_or_text(coord(repo, "assign", "t1", "--title", "t", "--expect", "e", "--write", "g.txt"))
    ok_doc_or_text(worker(repo, "start", "t1", session=A))
    proc = subprocess.Popen([str(BIN / "coord"), "watch", "--interval", "0.2"], cwd=repo,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out = Lines(proc.stderr)
        out.wait_for("watching: ready")
        ok_doc_or_text(worker(repo, "ask", "t1", "--question", "Which DB?", "--kind", "architecture", session=A))
        wait_until(lambda: lines_of(log), what="the decision delivered on the third try")
        # Still watching: a later report is notified too.
        ok_doc_or_text(worker(repo, "blocked", "t1", "--reason", "no DB", session=A))
        wait_until(lambda: len(lines_of(log)) >= 2, what="the blocked report")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert [d["event"] for d in lines_of(log)] == ["decision", "blocked"]
    failed = [e for e in events_file(repo) if e["kind"] == "notify-failed"]
    assert len(failed) == 2 and all("exit 9" in e["detail"] for e in failed)


# ---- apprise, against a local endpoint ----------------------------------------------------------

class Endpoint:
    def __init__(self, fail: int = 0) -> None:
        self.posts: list[tuple[str, dict[str, Any]]] = []
        self.fail = fail
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if outer.fail > 0:
                    outer.fail -= 1
                    self.send_response(500)
                else:
                    outer.posts.append((self.path, json.loads(body)))
                    self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint() -> Iterator[Callable[..., Endpoint]]:
    made: list[Endpoint] = []

    def make(fail: int = 0) -> Endpoint:
        made.append(Endpoint(fail))
        return made[-1]

    yield make
    for m in made:
        m.close()


def test_apprise_delivers_to_a_loopback_endpoint_with_the_secret_from_the_environment(
        make_repo, coord: Cli, worker: Cli, endpoint, monkeypatch: pytest.MonkeyPatch) -> None:
    ep = endpoint(fail=1)
    monkeypatch.setenv("HUNKWISE_TEST_SECRET", "s3cr3t-t0ken")
    repo = repo_with(make_repo, f'urls = ["json://127.0.0.1:{ep.port}/hook/$HUNKWISE_TEST_SECRET"]\n'
                                "retry_seconds = 0.01")
    ok_doc_or_text(coord(repo, "assign", "t1", "--title", "t", "--expect", "e", "--write", "g.txt"))
    ok_doc_or_text(worker(repo, "start", "t1", session=A))
    ok_doc_or_text(worker(repo, "ask", "t1", "--question", "Postgres or SQLite?", "--kind", "architecture",
              session=A))
    from hunkwise.coordinator import notify

    ctx = open_repo(str(repo))
    n = notify.Notifier(ctx)
    n.offer(notify.collect(ctx))
    n.deliver_due()
    assert ep.posts == [] and len(n.pending()) == 1  # the endpoint failed once: kept
    wait_until(lambda: n.deliver_due() or not n.pending(), what="the retry")
    assert len(ep.posts) == 1
    path, body = ep.posts[0]
    assert path == "/hook/s3cr3t-t0ken"
    assert "Postgres or SQLite?" in body["title"] and "decision waiting" in body["title"]
    # The secret is used, never written down.
    root = ctx.lay.root
    for f in root.rglob("*"):
        if f.is_file():
            assert b"s3cr3t" not in f.read_bytes(), f
    assert any(e["kind"] == "notify-failed" and "url:json:" in e["detail"] for e in events_file(repo))


def test_urls_from_the_environment_and_a_file_outside_the_repo(make_repo, endpoint, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from hunkwise.coordinator import notify

    a, b = endpoint(), endpoint()
    secret_file = tmp_path / "urls.txt"
    secret_file.write_text(f"# mine\njson://127.0.0.1:{a.port}/from-file\n")
    monkeypatch.setenv("HUNKWISE_NOTIFY_URLS", f"json://127.0.0.1:{b.port}/from-env")
    repo = repo_with(make_repo, f'urls_file = "{secret_file}"')
    ctx = open_repo(str(repo))
    urls, problems = notify.configured_urls(ctx)
    assert problems == [] and len(urls) == 2
    sent = notify.send_now(ctx, "hello", "brief body")
    assert sent == {"sent_to": 2, "errors": []}
    assert [p for p, _ in a.posts] == ["/from-file"] and [p for p, _ in b.posts] == ["/from-env"]

    monkeypatch.delenv("HUNKWISE_NOTIFY_URLS")
    inside = make_repo({"coord.toml": '[notify]\nurls_file = "URLS"\n', "URLS": "json://x/\n"})
    write(inside, "coord.toml", f'[notify]\nurls_file = "{inside}/URLS"\n')
    git(inside, "commit", "-qam", "abs")
    urls, problems = notify.configured_urls(open_repo(str(inside)))
    assert urls == [] and "inside the repository" in problems[0]


def test_an_unset_variable_is_a_recorded_failure_not_a_broken_url(make_repo, endpoint) -> None:
    from hunkwise.coordinator import notify

    ep = endpoint()
    assert notify.send_url(f"json://127.0.0.1:{ep.port}/$NOT_SET_ANYWHERE", "s", "b") == \
        "environment variable NOT_SET_ANYWHERE is not set"
    assert ep.posts == []
    assert notify.expand("a${X}b$Y", {"X": "1", "Y": "2"}) == "a1b2"


def test_hot_commands_never_import_apprise(make_repo, tmp_path: Path) -> None:
    repo = make_repo({"f.txt": "x\n"})
    code = ("import sys\nfrom hunkwise.coordinator.cli import main\n"
            "main(['status', '--brief'])\nmain(['status'])\n"
            "assert 'apprise' not in sys.modules, 'apprise imported'\n")
    p = subprocess.run([str(BIN / "python"), "-c", code], cwd=repo, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


# ---- coord status --brief ------------------------------------------------------------------------

def test_status_brief_fits_a_phone(make_repo, coord: Cli, worker: Cli, tmp_path: Path) -> None:
    log = tmp_path / "log"
    repo = repo_with(make_repo, f'command = "cat >> {log}"')
    for tid, grant in (("t1", "f.txt:1-3"), ("t2", "f.txt:5-6"), ("t3", "g.txt")):
        ok_doc_or_text(coord(repo, "assign", tid, "--title", f"title {tid}", "--expect", "e", "--write", grant))
    ok_doc_or_text(worker(repo, "start", "t1", session=A))
    ok_doc_or_text(worker(repo, "start", "t2", session=B))
    ok_doc_or_text(worker(repo, "start", "t3", session=C))
    age_claims(repo, "t1")
    ok_doc_or_text(worker(repo, "ask", "t2", "--question", "Ship on Friday?", "--kind", "deploy", session=B))
    ok_doc_or_text(worker(repo, "blocked", "t3", "--reason", "needs t9", session=C))
    r = coord(repo, "status", "--brief", json_out=False)
    assert r.code == 0, r.stderr
    text = r.stdout.rstrip("\n").split("\n")
    assert len(text) <= 9 and all(len(line) <= 100 for line in text)
    # t3 reported (blocked): its claim is over for the supervisor, its report waits (issue 26).
    assert text[0].startswith(f"{repo.name}: 2 open claim(s) (1 stale), 1 report(s) waiting, 1 decision(s)")
    assert any(line.startswith("decide dec-") and "[deploy] t2: Ship on Friday?" in line for line in text)
    assert "blocked t3: needs t9" in text
    assert any(line.startswith("claim t1 ") and line.endswith("STALE") for line in text)
    doc = ok_doc_or_text(coord(repo, "status", "--brief"))
    assert [c["task"] for c in doc["claims"] if c["stale"]] == ["t1"]
    assert doc["decisions"][0]["kind"] == "deploy" and doc["reports_waiting"] == ["t3"]
    # On demand, to the notifiers.
    doc = ok_doc_or_text(coord(repo, "status", "--brief", "--send"))
    assert doc["sent"] == {"sent_to": 1, "errors": []}
    sent = json.loads(log.read_text())
    assert sent["event"] == "brief" and sent["subject"] == text[0]
    assert coord(repo, "status", "--send").code == 2
