"""The session index: claims and their staleness, recovery, signals, checkpoints, handoffs,
audits, decisions and the Markdown view.

Every flow runs on a real git repository through the `worker` and `coord` CLIs. Where a
test only needs many signals or many reads to set the scene, it calls the core functions
in-process (the code the CLI runs) to stay fast. No test sleeps out a TTL: claims are aged in
the state (`age_claims`).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from testing.cli import Cli, Result, assign_and_start, ok
from testing.repo import git, numbered, write
from testing.state import age_claims

SESS_A = "sess-20260101-0900-worker@box-a"
SESS_B = "sess-20260101-0901-worker@box-b"
SESS_C = "sess-20260101-0902-worker@box-c"
REVIEW_R = "sess-20260101-0903-review@box-r"
REVIEW_R2 = "sess-20260101-0903-review.2@box-r"
REVIEW_OTHER = "sess-20260101-0904-review@elsewhere"
WORKER_R = "sess-20260101-0905-worker@box-r"
SECURITY = "sess-20260101-0000-security@m"
TESTER = "sess-20260101-0000-test@m"

SIG_ID = re.compile(r"^sig-(\d{8})-(\d{3,})$")
DEC_ID = re.compile(r"^dec-(\d{8})-(\d{3,})$")


# ---- helpers ---------------------------------------------------------------------------

def new_repo(make_repo: Callable[..., Path], *, ttl: int | None = None) -> Path:
    files: dict[str, str | bytes] = {"f.txt": numbered(10), "g.txt": numbered(10, "g")}
    if ttl is not None:
        files["coord.toml"] = f"[claims]\nttl_seconds = {ttl}\n"
    return make_repo(files)




def refused(r: Result, code: int) -> str:
    """Assert the exit code and the JSON error document; return the message."""
    assert r.code == code, f"exit {r.code}, wanted {code}\nstdout: {r.stdout}\nstderr: {r.stderr}"
    err = r.doc["error"]
    assert err["code"] == code
    return str(err["message"])


def _ctx(repo: Path):  # type: ignore[no-untyped-def]
    from hunkwise.shared.state.context import open_repo

    return open_repo(str(repo))


# Scene-setting steps run in-process (the code the CLI runs); the step under test goes
# through the CLI.

def assign(repo: Path, task_id: str, *grants: str) -> None:
    from hunkwise.coordinator import tasks

    tasks.assign(_ctx(repo), task_id=task_id, title=f"Title of {task_id}", expect="users see it",
                 writes=list(grants), checks=[], exclusive=False)


def start(repo: Path, task_id: str, session: str) -> dict[str, Any]:
    from hunkwise.worker import lifecycle

    return dict(lifecycle.start(_ctx(repo), task_id, session=session, role="worker"))


def done(repo: Path, task_id: str, session: str) -> None:
    from hunkwise.worker import lifecycle

    lifecycle.done(_ctx(repo), task_id, session=session, summary="s", unfinished=[],
                   message=None, run_checks=False)


def status(repo: Path) -> dict[str, Any]:
    from hunkwise.coordinator import tasks

    return dict(tasks.status(_ctx(repo)))


def all_signals(repo: Path) -> list[dict[str, Any]]:
    from hunkwise.coordinator import sessions

    return list(sessions.signals(_ctx(repo), pending_only=False)["signals"])


def task_row(status_doc: dict[str, Any], task_id: str) -> dict[str, Any]:
    rows = [t for t in status_doc["tasks"] if t["id"] == task_id]
    assert len(rows) == 1, status_doc["tasks"]
    return rows[0]


def pull(repo: Path, session: str, *, ack: bool = False) -> list[dict[str, Any]]:
    """`worker signals` for one session, in-process."""
    from hunkwise.worker import session as core

    return list(core.signals(_ctx(repo), session=session, do_ack=ack)["signals"])


def send(repo: Path, sender: str, to: str, about: str, payload: str = "",
         kind: str = "BLOCKED_ON") -> dict[str, Any]:
    """`worker signal`, in-process."""
    from hunkwise.worker import session as core

    return dict(core.signal(_ctx(repo), session=sender, to=to, kind=kind, about=about,
                            payload=payload)["signal"])


def ids(signals: list[dict[str, Any]]) -> set[str]:
    return {s["id"] for s in signals}


# ---- claims: live, stale, heartbeat, recover --------------------------------------------

def test_live_claim_is_refused_to_a_second_session_and_never_recovered(make_repo, coord, worker):
    repo = new_repo(make_repo)
    assign(repo, "t1", "f.txt")
    doc = ok(worker(repo, "start", "t1", session=SESS_A))
    assert doc["session"] == SESS_A
    assert doc["task"]["state"] == "in_progress"

    msg = refused(worker(repo, "start", "t1", session=SESS_B), 3)
    assert SESS_A in msg

    msg = refused(coord(repo, "recover", "t1", "--note", "try"), 3)
    assert SESS_A in msg and "live" in msg
    # Refusals changed nothing: A still holds the claim and keeps working.
    row = task_row(status(repo), "t1")
    assert (row["state"], row["session"], row["stale"]) == ("in_progress", SESS_A, False)


def test_stale_claim_is_shown_recovered_and_restarted_by_another_session(make_repo, coord, worker):
    repo = new_repo(make_repo)
    assign(repo, "t1", "f.txt")
    start(repo, "t1", SESS_A)
    write(repo, "f.txt", numbered(10).replace("line 3\n", "line 3 edited\n"))
    from hunkwise.worker import session as core

    core.checkpoint(_ctx(repo), "t1", session=SESS_A, next_step="resume f.txt at ## Setup — context: x",
                    context="halfway through")
    age_claims(repo, "t1")

    row = task_row(ok(coord(repo, "status")), "t1")
    assert row["state"] == "in_progress"
    assert row["stale"] is True
    assert row["unreported_changes"] is True

    doc = ok(coord(repo, "recover", "t1", "--note", "worker vanished"))
    assert doc["task"]["state"] == "assigned"
    assert doc["stale_session"] == SESS_A
    hf = Path(doc["handoff"]["file"])
    assert hf.is_file()
    saved = json.loads(hf.read_text())
    assert saved["files"] == ["f.txt"]
    assert saved["next"] == "resume f.txt at ## Setup — context: x"
    assert "worker vanished" in saved["context"]

    started = ok(worker(repo, "start", "t1", session=SESS_B))
    assert started["session"] == SESS_B
    assert started["task"]["state"] == "in_progress"
    cp = started["checkpoint"]
    assert cp is not None and cp["kind"] == "recovery"
    assert cp["files"] == ["f.txt"]
    assert cp["next"] == "resume f.txt at ## Setup — context: x"
    assert "worker vanished" in cp["context"] and "halfway through" in cp["context"]

    # The stale session cannot report over the new holder.
    msg = refused(worker(repo, "done", "t1", "--no-run-checks", session=SESS_A), 3)
    assert SESS_B in msg


def test_heartbeat_keeps_a_claim_alive(make_repo, coord, worker):
    repo = new_repo(make_repo)
    assign(repo, "t1", "f.txt")
    assign(repo, "t2", "g.txt")
    start(repo, "t1", SESS_A)
    start(repo, "t2", SESS_B)
    age_claims(repo, "t1", "t2")
    hb = ok(worker(repo, "heartbeat", "t1", session=SESS_A))
    assert hb["session"] == SESS_A

    doc = ok(coord(repo, "status"))
    assert task_row(doc, "t1")["stale"] is False
    assert task_row(doc, "t2")["stale"] is True
    # A heartbeat is the holder's alone.
    msg = refused(worker(repo, "heartbeat", "t2", session=SESS_A), 3)
    assert SESS_B in msg


def claim_heartbeat(repo: Path, task_id: str) -> float:
    from hunkwise.shared.state import store

    claim = store.load(_ctx(repo).lay).tasks[task_id].claim
    assert claim is not None
    return float(claim.heartbeat)


def test_every_worker_command_on_a_task_is_a_heartbeat(make_repo, worker):
    repo = new_repo(make_repo)
    assign(repo, "t1", "f.txt")
    start(repo, "t1", SESS_A)
    before = claim_heartbeat(repo, "t1")
    ok(worker(repo, "ask", "t1", "--question", "which schema?", session=SESS_A))
    assert claim_heartbeat(repo, "t1") > before


def test_recover_needs_an_in_progress_claim(make_repo, coord):
    repo = new_repo(make_repo)
    assign(repo, "t1", "f.txt")
    msg = refused(coord(repo, "recover", "t1"), 3)
    assert "t1" in msg
    refused(coord(repo, "recover", "nope"), 2)


# ---- signals -----------------------------------------------------------------------------

def test_direct_signal_reaches_only_its_session_until_acked(make_repo, coord, worker):
    repo = new_repo(make_repo)
    sig = ok(worker(repo, "signal", "--to", SESS_B, "--type", "BLOCKED_ON", "--about", "X",
                    "--payload", "P", session=SESS_A))["signal"]
    m = SIG_ID.match(sig["id"])
    assert m, sig["id"]
    assert m[1] == dt.datetime.now().strftime("%Y%m%d")
    assert (sig["from"], sig["to"], sig["type"], sig["about"], sig["payload"], sig["state"]) == \
        (SESS_A, SESS_B, "BLOCKED_ON", "X", "P", "pending")

    assert pull(repo, SESS_C) == []
    assert pull(repo, SESS_A) == []  # the sender does not get its own signal back

    got = ok(worker(repo, "signals", "--ack", session=SESS_B))["signals"]
    assert [(s["id"], s["from"], s["about"], s["payload"]) for s in got] == \
        [(sig["id"], SESS_A, "X", "P")]
    assert ok(worker(repo, "signals", session=SESS_B))["signals"] == []

    listed = ok(coord(repo, "signals"))["signals"]
    assert [(s["id"], s["to"], s["state"]) for s in listed] == [(sig["id"], SESS_B, "delivered")]


def test_broadcasts_reach_every_session_of_the_role_and_star_reaches_all(make_repo, worker):
    repo = new_repo(make_repo)
    # Through the CLI once; the rest in-process.
    on_box = ok(worker(repo, "signal", "--to", "review@box-r", "--type", "READY_FOR_REVIEW",
                       "--about", "t1", session=SESS_A))["signal"]
    any_box = send(repo, SESS_A, "review@*", "t2", kind="READY_FOR_REVIEW")
    everyone = send(repo, SESS_A, "*", "all", kind="BLOCKED_ON")
    assert SIG_ID.match(any_box["id"]) and SIG_ID.match(everyone["id"])
    assert len({on_box["id"], any_box["id"], everyone["id"]}) == 3

    assert ids(pull(repo, REVIEW_R)) == {on_box["id"], any_box["id"], everyone["id"]}
    assert ids(pull(repo, REVIEW_R2)) == {on_box["id"], any_box["id"], everyone["id"]}
    assert ids(pull(repo, REVIEW_OTHER)) == {any_box["id"], everyone["id"]}
    assert ids(pull(repo, WORKER_R)) == {everyone["id"]}
    assert pull(repo, SESS_A) == []

    # Acknowledging a broadcast is per session.
    assert ids(pull(repo, REVIEW_R, ack=True)) == {on_box["id"], any_box["id"], everyone["id"]}
    assert pull(repo, REVIEW_R) == []
    assert ids(pull(repo, REVIEW_R2)) == {on_box["id"], any_box["id"], everyone["id"]}


@pytest.mark.parametrize("args", [
    ("--to", SESS_B, "--type", "NOT_A_TYPE", "--about", "x"),
    ("--to", "nobody", "--type", "BLOCKED_ON", "--about", "x"),
    ("--to", "a b@c", "--type", "BLOCKED_ON", "--about", "x"),
    ("--to", "review@box|x", "--type", "BLOCKED_ON", "--about", "x"),
])
def test_bad_signal_type_or_target_exits_2_and_sends_nothing(make_repo, coord, worker, args):
    repo = new_repo(make_repo)
    refused(worker(repo, "signal", *args, session=SESS_A), 2)
    assert all_signals(repo) == []


def test_nul_in_a_signal_is_refused_with_exit_2(make_repo, coord):
    from hunkwise.shared.errors import CoordError

    repo = new_repo(make_repo)
    for about, payload in (("x", "a\x00b"), ("a\x00b", "p")):
        with pytest.raises(CoordError) as e:
            send(repo, SESS_A, SESS_B, about, payload)
        assert e.value.exit_code == 2
        assert "NUL" in e.value.message
    assert all_signals(repo) == []


def test_a_mistyped_session_target_is_refused_or_reaches_its_role(make_repo, worker):
    """`sess-20260101-900-worker@box-a` (HHMM typed as HMM) is no session id. Read as a
    `<role>@<machine>` broadcast it must reach that role's sessions; else it is malformed.
    Either way it must not be accepted and then reach nobody."""
    repo = new_repo(make_repo)
    target = "sess-20260101-900-worker@box-a"
    r = worker(repo, "signal", "--to", target, "--type", "BLOCKED_ON", "--about", "x",
               session=SESS_A)
    if r.code == 0:
        assert pull(repo, "sess-20260101-0900-sess-20260101-900-worker@box-a") != []
    else:
        refused(r, 2)


def test_an_oversized_payload_is_a_clean_usage_error(make_repo, worker):
    repo = new_repo(make_repo)
    r = worker(repo, "signal", "--to", SESS_B, "--type", "BLOCKED_ON", "--about", "x",
               "--payload", "a" * 70_000, session=SESS_A)
    msg = refused(r, 2)
    assert all_signals(repo) == []
    assert "Traceback" not in r.stderr
    assert not msg.startswith("internal error")


def test_human_signal_list_does_not_pass_terminal_escapes(make_repo, coord):
    repo = new_repo(make_repo)
    send(repo, SESS_A, SESS_B, about="x", payload="a\x1b]0;pwned\x07b")
    r = coord(repo, "signals", json_out=False)
    assert r.code == 0, r.stderr
    assert "pwned" in r.stdout
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout


def test_signal_without_a_session_exits_2(make_repo, worker):
    repo = new_repo(make_repo)
    msg = refused(worker(repo, "signal", "--to", "*", "--type", "BLOCKED_ON", "--about", "x"), 2)
    assert "session" in msg
    refused(worker(repo, "signals", "--session", "not-a-session"), 2)


# ---- checkpoints and handoffs -------------------------------------------------------------

NEXT = "resume f.txt at ## Setup — context: x"


def test_checkpoint_is_shown_at_the_next_start_of_the_same_session(make_repo, coord, worker):
    repo = new_repo(make_repo)
    assign(repo, "t1", "f.txt")
    start(repo, "t1", SESS_A)
    write(repo, "f.txt", numbered(10).replace("line 5\n", "line 5 edited\n"))
    write(repo, "g.txt", numbered(10, "g").replace("g 1\n", "g 1 not ours\n"))
    doc = ok(worker(repo, "checkpoint", "t1", "--next", NEXT, "--context", "C", session=SESS_A))
    assert doc["checkpoint"]["files"] == ["f.txt"]
    assert doc["signal"]["type"] == "CHECKPOINT" and doc["signal"]["to"] == SESS_A

    again = ok(worker(repo, "start", "t1", session=SESS_A))
    assert next(iter(again)) == "checkpoint"
    cp = again["checkpoint"]
    assert (cp["task"], cp["session"], cp["next"], cp["context"], cp["files"]) == \
        ("t1", SESS_A, NEXT, "C", ["f.txt"])
    assert again["signals"] == []  # the checkpoint is shown once: as the checkpoint
    # Another session's start is still refused: the checkpoint kept the claim.
    refused(worker(repo, "start", "t1", session=SESS_B), 3)


def test_human_start_shows_the_checkpoint_before_anything_else(make_repo, coord, worker):
    repo = new_repo(make_repo)
    assign(repo, "t1", "f.txt")
    start(repo, "t1", SESS_A)
    from hunkwise.worker import session as core

    core.checkpoint(_ctx(repo), "t1", session=SESS_A, next_step=NEXT, context="ctx-line")
    r = worker(repo, "start", "t1", session=SESS_A, json_out=False)
    assert r.code == 0, r.stderr
    assert NEXT in r.stdout and "ctx-line" in r.stdout
    assert r.stdout.index(NEXT) < r.stdout.index("Title of t1")


def test_handoff_reserves_the_task_for_its_target(make_repo, coord, worker):
    repo = new_repo(make_repo)
    assign(repo, "t1", "f.txt")
    start(repo, "t1", SESS_A)
    write(repo, "f.txt", numbered(10).replace("line 2\n", "line 2 edited\n"))
    refused(worker(repo, "handoff", "t1", "--to", "not a target", "--next", "N", session=SESS_A), 2)
    refused(worker(repo, "handoff", "t1", "--to", SESS_C, "--next", "N", session=SESS_B), 3)

    doc = ok(worker(repo, "handoff", "t1", "--to", SESS_C, "--next", "N: finish ## Setup",
                    "--context", "K", session=SESS_A))
    assert doc["task"]["state"] == "assigned"
    hf = Path(doc["handoff"]["file"])
    assert hf.is_file()
    saved = json.loads(hf.read_text())
    assert (saved["files"], saved["next"], saved["context"], saved["to"]) == \
        (["f.txt"], "N: finish ## Setup", "K", SESS_C)
    assert (doc["signal"]["type"], doc["signal"]["to"]) == ("HANDOFF", SESS_C)
    row = task_row(status(repo), "t1")
    assert row["state"] == "assigned" and row["stale"] is False

    msg = refused(worker(repo, "start", "t1", session=SESS_B), 3)
    assert SESS_C in msg

    started = ok(worker(repo, "start", "t1", session=SESS_C))
    assert started["session"] == SESS_C
    cp = started["checkpoint"]
    assert (cp["kind"], cp["session"], cp["next"], cp["context"], cp["files"]) == \
        ("handoff", SESS_A, "N: finish ## Setup", "K", ["f.txt"])
    handoffs = [s for s in started["signals"] if s["type"] == "HANDOFF"]
    assert [(s["from"], s["about"], s["payload"]) for s in handoffs] == \
        [(SESS_A, "t1", "N: finish ## Setup")]


# ---- audits ---------------------------------------------------------------------------------

def _audited_and_reported(coord: Cli, worker: Cli, repo: Path) -> None:
    assign(repo, "t1", "f.txt")
    doc = ok(coord(repo, "audit", "t1", "--roles", "review,security"))
    assert doc["audit"] == {"review": "pending", "security": "pending"}
    assert sorted((s["type"], s["to"]) for s in doc["signals"]) == \
        [("READY_FOR_REVIEW", "review@*"), ("READY_FOR_REVIEW", "security@*")]
    for reviewer in (REVIEW_R, SECURITY):  # verdicts come from started sessions
        ok(worker(repo, "start", "--session", reviewer))
    start(repo, "t1", SESS_A)
    write(repo, "f.txt", numbered(10).replace("line 4\n", "line 4 edited\n"))
    done(repo, "t1", SESS_A)


def test_a_resubmission_needs_the_audit_again(make_repo, coord, worker):
    repo = new_repo(make_repo)
    _audited_and_reported(coord, worker, repo)
    from hunkwise.worker import session as core

    for who in (REVIEW_R, SECURITY):
        core.give_verdict(_ctx(repo), "t1", session=who, verdict="approve", notes="ok")
    ok(coord(repo, "request-changes", "t1", "--note", "one more line"))
    start(repo, "t1", SESS_A)
    write(repo, "f.txt", numbered(10).replace("line 4\n", "line 4 edited\n")
          .replace("line 5\n", "line 5 too\n"))
    done(repo, "t1", SESS_A)
    # The approvals were about revision 1: revision 2 waits for new verdicts.
    msg = refused(coord(repo, "accept", "t1"), 1)
    assert "audit-pending" in msg
    asks = [x for x in pull(repo, REVIEW_R) if x["type"] == "READY_FOR_REVIEW"]
    assert any("revision 2" in x["payload"] for x in asks)


def test_audit_gates_accept_until_every_role_approves(make_repo, coord, worker):
    repo = new_repo(make_repo)
    assign(repo, "t2", "g.txt")
    _audited_and_reported(coord, worker, repo)
    head = git(repo, "rev-parse", "HEAD").strip()

    # A reviewer session started the usual way: the role comes from the session id.
    reviewer = ok(worker(repo, "start", "t2", "--role", "review"))["session"]
    assert "-review@" in reviewer
    asks = [s for s in pull(repo, reviewer) if s["type"] == "READY_FOR_REVIEW"]
    assert [(s["about"], s["to"]) for s in asks] == [("t1", "review@*")]

    msg = refused(coord(repo, "accept", "t1"), 1)
    assert "audit-pending" in msg

    ok(worker(repo, "review", "t1", "--verdict", "changes", "--notes", "N", session=SECURITY))
    msg = refused(coord(repo, "accept", "t1"), 1)
    assert "audit-changes" in msg

    msg = refused(worker(repo, "review", "t1", "--verdict", "approve", "--notes", "ok",
                         session=TESTER), 3)
    assert "test" in msg

    ok(worker(repo, "review", "t1", "--verdict", "approve", "--notes", "fine", session=reviewer))
    from hunkwise.worker import session as core

    core.give_verdict(_ctx(repo), "t1", session=SECURITY, verdict="approve", notes="fixed")
    assert git(repo, "rev-parse", "HEAD").strip() == head  # nothing was committed before
    accepted = ok(coord(repo, "accept", "t1"))
    assert accepted["paths"] == ["f.txt"]
    assert git(repo, "rev-parse", "HEAD").strip() == accepted["commit"] != head
    assert "Coord-Task: t1" in git(repo, "log", "-1", "--format=%B")
    assert git(repo, "show", "HEAD:f.txt").splitlines()[3] == "line 4 edited"


def test_coord_next_shows_the_verdict_of_a_review_report(make_repo, coord, worker):
    repo = new_repo(make_repo)
    _audited_and_reported(coord, worker, repo)
    work = ok(coord(repo, "next"))["next"]
    assert work["report"]["task_id"] == "t1"
    assert "audit-pending" in {f["code"] for f in work["validation"]["findings"]}

    ok(worker(repo, "review", "t1", "--verdict", "changes", "--notes", "rename x",
              session=SECURITY))
    nxt = ok(coord(repo, "next"))["next"]
    rep = nxt["report"]
    assert (rep["task_id"], rep["kind"], rep["role"], rep["verdict"], rep["summary"]) == \
        ("t1", "review", "security", "changes", "rename x")
    assert nxt["audit"] == {"review": "pending", "security": "changes"}
    assert {f["code"] for f in nxt["validation"]["findings"]} == {"audit-pending", "audit-changes"}


# ---- decisions -----------------------------------------------------------------------------

def test_decision_is_asked_listed_answered_once_and_counted(make_repo, coord, worker):
    repo = new_repo(make_repo)
    assign(repo, "t1", "f.txt")
    start(repo, "t1", SESS_A)
    dec = ok(worker(repo, "ask", "t1", "--question", "one table or two?", "--kind",
                    "architecture", session=SESS_A))["decision"]
    assert DEC_ID.match(dec["id"]), dec["id"]

    listed = ok(coord(repo, "decisions"))
    assert [(d["id"], d["task"], d["kind"], d["state"], d["question"], d["session"])
            for d in listed["decisions"]] == \
        [(dec["id"], "t1", "architecture", "open", "one table or two?", SESS_A)]
    assert listed["interventions"] == 0

    ok(coord(repo, "decide", dec["id"], "--answer", "two tables"))
    got = [s for s in ok(worker(repo, "signals", session=SESS_A))["signals"]
           if s["type"] == "DECISION"]
    assert [(s["about"], s["payload"]) for s in got] == [(dec["id"], "two tables")]
    assert pull(repo, SESS_B) == []  # the answer goes to the asking session only

    after = ok(coord(repo, "status"))
    assert after["interventions"] == 1
    assert after["decisions_open"] == 0

    msg = refused(coord(repo, "decide", dec["id"], "--answer", "three"), 3)
    assert "two tables" in msg
    refused(coord(repo, "decide", "dec-20990101-999", "--answer", "x"), 2)
    assert status(repo)["interventions"] == 1


def test_ask_with_an_unknown_kind_or_no_question_exits_2(make_repo, coord, worker):
    repo = new_repo(make_repo)
    assign(repo, "t1", "f.txt")
    refused(worker(repo, "ask", "t1", "--question", "q", "--kind", "vibes", session=SESS_A), 2)
    refused(worker(repo, "ask", "t1", "--question", "  ", session=SESS_A), 2)
    assert status(repo)["decisions_open"] == 0


# ---- unknown ids ------------------------------------------------------------------------------

@pytest.mark.parametrize("tool,args", [
    ("worker", ("checkpoint", "nope", "--next", "resume x")),
    ("worker", ("handoff", "nope", "--to", SESS_B, "--next", "resume x")),
    ("worker", ("ask", "nope", "--question", "q")),
    ("worker", ("heartbeat", "nope")),
    ("worker", ("review", "nope", "--verdict", "approve")),
    ("coord", ("audit", "nope", "--roles", "review")),
    ("coord", ("audit", "../x", "--roles", "review")),
    ("coord", ("audit", "t1", "--roles", "re view")),
])
def test_unknown_or_malformed_ids_exit_2(make_repo, coord, worker, tool, args):
    repo = new_repo(make_repo)
    assign(repo, "t1", "f.txt")
    run = worker if tool == "worker" else coord
    msg = refused(run(repo, *args, session=REVIEW_R), 2)
    if args[1] == "nope":
        assert "nope" in msg


# ---- the Markdown index ---------------------------------------------------------------------

def unescaped_pipes(line: str) -> int:
    """`|` separators GFM sees in a table line: a backslash escapes the next character."""
    n, i = 0, 0
    while i < len(line):
        if line[i] == "\\":
            i += 2
            continue
        n += line[i] == "|"
        i += 1
    return n


def tables(md: str) -> dict[str, list[str]]:
    """Section heading -> its table lines (header, rule, rows)."""
    out: dict[str, list[str]] = {}
    current = None
    for line in md.split("\n"):
        if line.startswith("## "):
            current = line[3:]
            out[current] = []
        elif current is not None and line.startswith("|"):
            out[current].append(line)
    return out


HOSTILE = [
    "two\nlines\r\nand a\rreturn",
    "pipe | in | the | middle \\| and escaped",
    "**bold** _em_ [a](b) ![i](j) # head",
    "<script>alert(1)</script> <b>x</b>",
    "`code` ``` fenced ```",
    "esc \x1b[31mred\x1b[0m bell\x07 tab\there del\x7f",
    "trailing backslash \\",
    "a" + "|" * 300,
    "line sep \u2028 next line \x85 end",
]


def test_index_renders_claims_and_signals_without_breaking_its_tables(make_repo, coord, worker):
    repo = make_repo({"we|ird `name`.md": "x\n", "f.txt": numbered(10)})
    assign(repo, "t1", "we|ird `name`.md")
    start(repo, "t1", SESS_A)
    for text in HOSTILE:
        send(repo, SESS_A, SESS_B, about=f"about {text}", payload=text)
    ok(worker(repo, "signal", "--to", "*", "--type", "BLOCKED_ON", "--about", "x|y\nz",
              "--payload", "<script>p</script>|\n| --- |", session=SESS_B))
    listed = ok(coord(repo, "signals"))["signals"]
    assert len(listed) == len(HOSTILE) + 1

    doc = ok(coord(repo, "index", "--output", "index.md"))
    md = (repo / "index.md").read_text()
    assert md == doc["markdown"]
    secs = tables(md)
    assert {"Active claims", "Stale claims", "Signals"} <= set(secs)
    for name, lines in secs.items():
        header = unescaped_pipes(lines[0])
        assert all(unescaped_pipes(line) == header for line in lines), (name, lines)
        assert lines[1].replace("|", "").replace("-", "").strip() == ""

    rows = secs["Signals"][2:]
    assert len(rows) == len(listed)
    for sig, row in zip(listed, rows, strict=True):
        assert sig["id"] in row
    active = secs["Active claims"][2:]
    assert len(active) == 1 and SESS_A in active[0] and "t1" in active[0]
    assert secs["Stale claims"][2:] == ["| - | - | - | - | - | - | - |"]

    assert "<script" not in md and "<b>" not in md
    assert "[a](b)" not in md and "**bold**" not in md
    assert "\x1b" not in md and "\x07" not in md and "\r" not in md


def test_index_holds_no_control_characters(make_repo, coord):
    repo = new_repo(make_repo)
    send(repo, SESS_A, SESS_B, about="c1", payload="csi \x9b31m red \x9d osc")
    md = ok(coord(repo, "index"))["markdown"]
    bad = sorted({hex(ord(c)) for c in md if unicodedata.category(c) == "Cc" and c != "\n"})
    assert bad == []


def test_index_lists_stale_claims_apart(make_repo, coord, worker):
    repo = new_repo(make_repo)
    assign(repo, "t1", "f.txt")
    assign(repo, "t2", "g.txt")
    start(repo, "t1", SESS_A)
    age_claims(repo, "t1")
    start(repo, "t2", SESS_B)
    secs = tables(ok(coord(repo, "index"))["markdown"])
    active, stale = secs["Active claims"][2:], secs["Stale claims"][2:]
    assert len(active) == 1 and SESS_B in active[0] and "t2" in active[0]
    assert len(stale) == 1 and SESS_A in stale[0] and "t1" in stale[0]


def test_index_output_to_an_unwritable_place_exits_2(make_repo, coord):
    repo = new_repo(make_repo)
    write(repo, "afile", "x\n")
    refused(coord(repo, "index", "--output", "afile/sub/index.md"), 2)


def test_recover_releases_a_handoff_nobody_can_take(make_repo, coord, worker) -> None:
    repo = make_repo({"a.txt": "1\n"})
    assign_and_start(coord, worker, repo, "A", "a.txt", lambda: None, session=SESS_A)
    typo = "sess-20260101-0900-workr@box-a"
    assert worker(repo, "handoff", "A", "--to", typo, "--next", "n", session=SESS_A).code == 0
    assert worker(repo, "start", "A", "--session", SESS_B).code == 3
    r = coord(repo, "recover", "A")
    assert r.code == 0 and r.doc["released_reservation"] == typo
    assert worker(repo, "start", "A", "--session", SESS_B).code == 0
