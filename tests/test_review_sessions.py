"""Review sessions, verdicts trusted only from the sessions an audit asked, and signals that
close when what they asked for happened."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from testing.cli import Result, ok_doc_or_text
from testing.repo import git, numbered, write

BUILD = "sess-20260101-0900-build@box"
BUILD2 = "sess-20260101-0901-build@box"
INVENTED = "sess-20260101-0902-review@box"
SESSION = re.compile(r"^sess-\d{8}-\d{4}-(?P<role>[A-Za-z0-9_-]+)(\.\d+)?@[A-Za-z0-9_-]+$")


def refused(r: Result, code: int) -> str:
    assert r.code == code, f"exit {r.code}, wanted {code}\n{r.stdout}\n{r.stderr}"
    return str(r.doc["error"]["message"])


def _state(repo: Path) -> Any:
    from hunkwise.shared.state import store
    from hunkwise.shared.state.context import open_repo

    return store.load(open_repo(str(repo)).lay)


def _signals(coord: Any, repo: Path) -> list[dict[str, Any]]:
    return list(ok_doc_or_text(coord(repo, "signals"))["signals"])


def _reported(coord: Any, worker: Any, repo: Path, roles: str, task: str = "A") -> None:
    ok_doc_or_text(coord(repo, "assign", task, "--title", "Greet", "--expect", "hello", "--write", "f.txt"))
    ok_doc_or_text(coord(repo, "audit", task, "--roles", roles))
    ok_doc_or_text(worker(repo, "start", task, session=BUILD))
    write(repo, "f.txt", numbered(5).replace("line 2\n", "hello\n"))
    ok_doc_or_text(worker(repo, "done", task, "--commit-message", "Greet with hello", session=BUILD))


def _review_session(worker: Any, repo: Path, role: str = "review") -> str:
    return str(ok_doc_or_text(worker(repo, "start", "--role", role))["session"])


# ---- getting a review session ---------------------------------------------------------------

def test_a_reviewer_starts_a_session_without_a_task(make_repo, coord, worker):
    repo = make_repo({"f.txt": numbered(5)})
    _reported(coord, worker, repo, "review")
    doc = ok_doc_or_text(worker(repo, "start", "--role", "review"))
    s = doc["session"]
    m = SESSION.match(s)
    assert m and m["role"] == "review", s
    assert doc["task"] is None
    assert s in _state(repo).sessions
    # The audit request waiting for its role is in the brief, and in worker signals.
    assert [(x["type"], x["about"]) for x in doc["signals"]] == [("READY_FOR_REVIEW", "A")]
    got = ok_doc_or_text(worker(repo, "signals", session=s))["signals"]
    assert [(x["type"], x["about"]) for x in got] == [("READY_FOR_REVIEW", "A")]
    human = ok_doc_or_text(worker(repo, "start", "--role", "review", json_out=False))
    assert "export COORD_SESSION=sess-" in human and "worker review" in human
    # A second session of the role in the same minute is a new one.
    assert ok_doc_or_text(worker(repo, "start", "--role", "review"))["session"] not in (s,)
    # Without a task, a role or a session there is nothing to start.
    refused(worker(repo, "start"), 2)


def test_worker_review_without_a_session_opens_one(make_repo, coord, worker):
    repo = make_repo({"f.txt": numbered(5)})
    _reported(coord, worker, repo, "review")
    doc = ok_doc_or_text(worker(repo, "review", "A", "--verdict", "approve", "--notes", "fine"))
    m = SESSION.match(doc["session"])
    assert m and m["role"] == "review", doc["session"]
    assert doc["session"] in _state(repo).sessions
    assert doc["audit"] == {"review": "approved"}
    # The role of a new session can be named; one the audit did not ask is refused.
    refused(worker(repo, "review", "A", "--verdict", "approve", "--role", "security"), 3)
    assert not [s for s in _state(repo).sessions if "-security@" in s]


# ---- verdicts only from the sessions the audit asked ------------------------------------------

def test_a_verdict_from_a_session_never_started_is_refused(make_repo, coord, worker):
    repo = make_repo({"f.txt": numbered(5)})
    _reported(coord, worker, repo, "review")
    msg = refused(worker(repo, "review", "A", "--verdict", "approve", session=INVENTED), 3)
    assert INVENTED in msg and "worker start --role review" in msg
    # Naming it in another command does not start it either.
    ok_doc_or_text(worker(repo, "signals", "--ack", session=INVENTED))
    refused(worker(repo, "review", "A", "--verdict", "approve", session=INVENTED), 3)
    assert "audit-pending" in refused(coord(repo, "accept", "A"), 1)
    # Started, it may answer.
    assert ok_doc_or_text(worker(repo, "start", "--role", "review", session=INVENTED))["session"] == INVENTED
    ok_doc_or_text(worker(repo, "review", "A", "--verdict", "approve", session=INVENTED))
    ok_doc_or_text(coord(repo, "accept", "A"))


def test_a_verdict_comes_only_from_the_session_the_audit_was_addressed_to(
        make_repo, coord, worker):
    repo = make_repo({"f.txt": numbered(5)})
    chosen = _review_session(worker, repo)
    other = _review_session(worker, repo)
    _reported(coord, worker, repo, chosen)
    doc = ok_doc_or_text(coord(repo, "status"))
    assert [t["audit"] for t in doc["tasks"]] == [{"review": "pending"}]
    asks = [s for s in _signals(coord, repo) if s["type"] == "READY_FOR_REVIEW"]
    assert [(s["to"], s["about"]) for s in asks] == [(chosen, "A")]
    msg = refused(worker(repo, "review", "A", "--verdict", "approve", session=other), 3)
    assert chosen in msg
    # The worker's own session is of another role: refused too.
    refused(worker(repo, "review", "A", "--verdict", "approve", session=BUILD), 3)
    ok_doc_or_text(worker(repo, "review", "A", "--verdict", "approve", session=chosen))
    ok_doc_or_text(coord(repo, "accept", "A"))


def _trailers(repo: Path, key: str) -> list[str]:
    out = git(repo, "log", "-1", f"--format=%(trailers:key={key},valueonly,unfold)")
    return [line for line in out.split("\n") if line]


def test_accept_names_the_worker_and_every_approving_reviewer(make_repo, coord, worker):
    repo = make_repo({"f.txt": numbered(5)})
    _reported(coord, worker, repo, "review,security")
    rev = _review_session(worker, repo)
    sec = _review_session(worker, repo, "security")
    ok_doc_or_text(worker(repo, "review", "A", "--verdict", "changes", "--notes", "hmm", session=sec))
    ok_doc_or_text(worker(repo, "review", "A", "--verdict", "approve", session=rev))
    ok_doc_or_text(worker(repo, "review", "A", "--verdict", "approve", session=sec))
    ok_doc_or_text(coord(repo, "accept", "A", "--message", "Greet with hello\n\nBody.\n\nSigned-off-by: X <x@y>"))
    body = git(repo, "log", "-1", "--format=%B")
    assert _trailers(repo, "Coord-Task") == ["A"]
    assert _trailers(repo, "Coord-Session") == [BUILD]
    assert sorted(_trailers(repo, "Reviewed-by")) == sorted([rev, sec])
    assert _trailers(repo, "Signed-off-by") == ["X <x@y>"]  # one trailer block
    assert "\n\nCoord-Task" not in body


def test_an_unaudited_commit_has_no_reviewer(make_repo, coord, worker):
    repo = make_repo({"f.txt": numbered(5)})
    ok_doc_or_text(coord(repo, "assign", "A", "--title", "Greet", "--expect", "hello", "--write", "f.txt"))
    ok_doc_or_text(worker(repo, "start", "A", session=BUILD))
    write(repo, "f.txt", "x\n")
    ok_doc_or_text(worker(repo, "done", "A", session=BUILD))
    ok_doc_or_text(coord(repo, "accept", "A"))
    assert _trailers(repo, "Coord-Session") == [BUILD]
    assert _trailers(repo, "Reviewed-by") == []


# ---- signals that close -----------------------------------------------------------------------

def test_ready_for_review_closes_when_its_roles_verdict_arrives(make_repo, coord, worker):
    repo = make_repo({"f.txt": numbered(5)})
    _reported(coord, worker, repo, "review,security")
    rev = _review_session(worker, repo)
    rev2 = _review_session(worker, repo)
    # One reviewer's acknowledgement is its own: the request stays open for the role.
    ok_doc_or_text(worker(repo, "signals", "--ack", session=rev2))
    states = {s["to"]: s["state"] for s in _signals(coord, repo) if s["type"] == "READY_FOR_REVIEW"}
    assert states == {"review@*": "pending", "security@*": "pending"}
    assert [s["about"] for s in ok_doc_or_text(worker(repo, "signals", session=rev))["signals"]] == ["A"]

    ok_doc_or_text(worker(repo, "review", "A", "--verdict", "changes", session=rev))
    states = {s["to"]: s["state"] for s in _signals(coord, repo) if s["type"] == "READY_FOR_REVIEW"}
    assert states == {"review@*": "delivered", "security@*": "pending"}
    assert ok_doc_or_text(worker(repo, "signals", session=rev))["signals"] == []


def test_a_handoff_closes_when_its_target_starts(make_repo, coord, worker):
    repo = make_repo({"f.txt": numbered(5)})
    ok_doc_or_text(coord(repo, "assign", "A", "--title", "t", "--expect", "e", "--write", "f.txt"))
    ok_doc_or_text(worker(repo, "start", "A", session=BUILD))
    sig = ok_doc_or_text(worker(repo, "handoff", "A", "--to", BUILD2, "--next", "resume f.txt",
                    session=BUILD))["signal"]["id"]
    assert {s["id"]: s["state"] for s in _signals(coord, repo)}[sig] == "pending"
    started = ok_doc_or_text(worker(repo, "start", "A", session=BUILD2))
    assert [s["id"] for s in started["signals"]] == [sig]  # shown once, at the start
    assert {s["id"]: s["state"] for s in _signals(coord, repo)}[sig] == "delivered"
    assert ok_doc_or_text(worker(repo, "signals", session=BUILD2))["signals"] == []


def test_a_checkpoint_shows_once_at_start(make_repo, coord, worker):
    repo = make_repo({"f.txt": numbered(5)})
    ok_doc_or_text(coord(repo, "assign", "A", "--title", "t", "--expect", "e", "--write", "f.txt"))
    ok_doc_or_text(worker(repo, "start", "A", session=BUILD))
    ok_doc_or_text(worker(repo, "checkpoint", "A", "--next", "resume f.txt at ## Tail", session=BUILD))
    doc = ok_doc_or_text(worker(repo, "start", "A", session=BUILD))
    assert doc["checkpoint"]["next"] == "resume f.txt at ## Tail"
    assert [s for s in doc["signals"] if s["type"] == "CHECKPOINT"] == []
    ok_doc_or_text(worker(repo, "checkpoint", "A", "--next", "resume f.txt at ## Head", session=BUILD))
    human = ok_doc_or_text(worker(repo, "start", "A", session=BUILD, json_out=False))
    assert human.count("resume f.txt at ## Head") == 1
    assert "## Tail" not in human


def test_worker_signals_shows_pending_and_all_shows_history(make_repo, coord, worker):
    repo = make_repo({"f.txt": numbered(5)})
    sig = ok_doc_or_text(worker(repo, "signal", "--to", BUILD2, "--type", "BLOCKED_ON", "--about", "x",
                    session=BUILD))["signal"]["id"]
    assert [s["id"] for s in ok_doc_or_text(worker(repo, "signals", "--ack", session=BUILD2))["signals"]] == [sig]
    assert ok_doc_or_text(worker(repo, "signals", session=BUILD2))["signals"] == []
    hist = ok_doc_or_text(worker(repo, "signals", "--all", session=BUILD2))["signals"]
    assert [(s["id"], s["state"]) for s in hist] == [(sig, "delivered")]
    human = ok_doc_or_text(worker(repo, "signals", "--all", session=BUILD2, json_out=False))
    assert sig in human and "delivered" in human
