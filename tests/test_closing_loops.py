"""Loops a coordinator's real day must be able to close: signals, the index file."""

from __future__ import annotations

import os
from pathlib import Path

from testing.cli import ok
from testing.repo import git, numbered, write
from testing.state import age_claims

COORD = "sess-20260101-0800-coordinator@desk"
W1 = "sess-20260101-0900-build@desk"
W2 = "sess-20260101-0901-build@laptop"
REVIEW = "sess-20260101-0902-review@laptop"


def signal(worker, repo: Path, sender: str, to: str, about: str = "t1") -> str:
    return ok(worker(repo, "signal", "--to", to, "--type", "BLOCKED_ON", "--about", about,
                     "--payload", "need a decision", session=sender))["signal"]["id"]


def test_the_coordinator_acknowledges_signals_addressed_to_it(make_repo, coord, worker):
    repo = make_repo({"f.txt": numbered(3)})
    mine = signal(worker, repo, W1, "coordinator@desk")
    also = signal(worker, repo, W1, "*")
    theirs = signal(worker, repo, W1, REVIEW)
    r = coord(repo, "signals", "--ack", theirs, session=COORD)
    assert r.code == 3 and REVIEW in r.doc["error"]["message"]
    assert coord(repo, "signals", "--ack", "sig-nope", session=COORD).code == 2
    doc = ok(coord(repo, "signals", "--ack", mine, session=COORD))
    assert doc["acked"] == [mine]
    states = {s["id"]: s["state"] for s in doc["signals"]}
    assert states == {mine: "delivered", also: "pending", theirs: "pending"}
    doc = ok(coord(repo, "signals", "--ack", "all", session=COORD))
    assert doc["acked"] == [also]
    assert {s["id"] for s in ok(coord(repo, "signals", "--pending"))["signals"]} == {theirs}


def test_index_shows_pending_signals_and_all_on_request(make_repo, coord, worker):
    repo = make_repo({"f.txt": numbered(3)})
    done_id = signal(worker, repo, W1, "coordinator@desk", about="first")
    open_id = signal(worker, repo, W1, "coordinator@desk", about="second")
    ok(coord(repo, "signals", "--ack", done_id, session=COORD))
    md = ok(coord(repo, "index"))["markdown"]
    assert open_id in md and done_id not in md
    md = ok(coord(repo, "index", "--all"))["markdown"]
    assert open_id in md and done_id in md


def test_index_output_defaults_to_the_state_directory_and_keeps_status_clean(
        make_repo, coord):
    repo = make_repo({"f.txt": numbered(3)})
    doc = ok(coord(repo, "index", "--output"))
    out = Path(doc["output"])
    assert out.name == "SESSIONS.md" and out.read_text() == doc["markdown"]
    assert git(repo, "status", "--porcelain") == ""
    # Written into the tree on purpose: git-excluded, so no unowned change appears.
    doc = ok(coord(repo, "index", "--output", "SESSIONS.md"))
    assert (repo / "SESSIONS.md").read_text() == doc["markdown"]
    assert git(repo, "status", "--porcelain") == ""
    assert ok(coord(repo, "status"))["unowned"] == []
    ok(coord(repo, "index", "--output", "SESSIONS.md"))
    exclude = (repo / ".git/info/exclude").read_text().splitlines()
    assert exclude.count("/SESSIONS.md") == 1


def test_a_recovery_handoff_goes_to_the_role_not_to_everyone(make_repo, coord, worker):
    repo = make_repo({"f.txt": numbered(3)})
    ok(coord(repo, "assign", "t1", "--title", "t", "--expect", "e", "--write", "f.txt"))
    ok(worker(repo, "start", "t1", session=W1))
    write(repo, "f.txt", "changed\n")
    age_claims(repo, "t1")
    ok(coord(repo, "recover", "t1", "--note", "laptop died"))
    review_sees = ok(worker(repo, "signals", session=REVIEW))["signals"]
    assert [s for s in review_sees if s["type"] == "HANDOFF"] == []
    build_sees = ok(worker(repo, "signals", session=W2))["signals"]
    assert [s["about"] for s in build_sees if s["type"] == "HANDOFF"] == ["t1"]


def test_coord_commit_commits_the_coordinators_own_file_and_nothing_else(make_repo, coord,
                                                                         worker):
    repo = make_repo({"f.txt": numbered(3), "coord.toml": "[claims]\nttl_seconds = 60\n"})
    ok(coord(repo, "assign", "t1", "--title", "t", "--expect", "e", "--write", "f.txt"))
    ok(worker(repo, "start", "t1", session=W1))
    write(repo, "f.txt", "worker's edit\n")
    write(repo, "coord.toml", "[claims]\nttl_seconds = 900\n")
    git(repo, "add", "f.txt")  # someone staged the worker's file: it must stay staged
    r = coord(repo, "commit", "f.txt", "-m", "not mine")
    assert r.code == 3 and "t1" in r.doc["error"]["message"]
    doc = ok(coord(repo, "commit", "coord.toml", "-m", "Longer claims"))
    assert doc["paths"] == ["coord.toml"]
    assert git(repo, "show", "--name-only", "--format=%s", "HEAD").split() == [
        "Longer", "claims", "coord.toml"]
    assert git(repo, "show", "HEAD:f.txt") == numbered(3)
    assert (repo / "f.txt").read_text() == "worker's edit\n"
    assert git(repo, "diff", "--cached", "--name-only") == "f.txt\n"
    assert coord(repo, "commit", "coord.toml", "-m", "again").code == 1  # nothing to commit
    assert coord(repo, "commit", "../outside", "-m", "x").code == 2


def test_status_shows_this_batch_and_readable_lines_and_never_writes(make_repo, coord, worker):
    repo = make_repo({"f.txt": numbered(10), "g.txt": numbered(3)})
    ok(coord(repo, "assign", "old", "--title", "t", "--expect", "e", "--write", "g.txt"))
    ok(worker(repo, "start", "old", session=W1))
    write(repo, "g.txt", "G\n")
    ok(worker(repo, "done", "old", session=W1))
    ok(coord(repo, "accept", "old"))
    ok(coord(repo, "freeze"))
    ok(coord(repo, "thaw"))
    ok(coord(repo, "assign", "A", "--title", "t", "--expect", "e", "--write", "f.txt:1-5"))
    ok(coord(repo, "assign", "B", "--title", "t", "--expect", "e", "--write", "f.txt:6-10"))
    write(repo, "f.txt", numbered(10).replace("line 5\nline 6\n", "line 5\nnew\nline 6\n")
          .replace("line 9\n", ""))
    st = ok(coord(repo, "status"))
    assert [t["id"] for t in st["tasks"]] == ["A", "B"]
    # The thaw moved the closed batch's finished task to the archive.
    assert '"old"' not in next((repo / ".git" / "coord").glob("state.json")).read_text()
    assert [t["id"] for t in ok(coord(repo, "status", "--all"))["tasks"]] == ["A", "B", "old"]
    assert st["ambiguous"] == [{"path": "f.txt", "tasks": ["A", "B"], "lines": "after 5"}]
    git(repo, "commit", "-q", "--allow-empty", "-m", "someone else's commit")
    state = next((repo / ".git" / "coord").glob("state.json"))
    before = state.stat().st_mtime_ns, state.read_bytes()
    ok(coord(repo, "status"))
    assert (state.stat().st_mtime_ns, state.read_bytes()) == before
    human = coord(repo, "status", json_out=False).stdout
    assert "ambiguous: f.txt lines after 5 could be A or B's" in human
    assert "unowned" not in human


def test_assign_names_the_serial_rule_takes_one_line_and_warns_on_touching_ranges(
        make_repo, coord):
    repo = make_repo({"f.txt": numbered(10),
                      "coord.toml": '[ownership]\nserial = ["f.txt"]\n', "g.txt": numbered(5)})
    ok(coord(repo, "assign", "A", "--title", "t", "--expect", "e", "--write", "f.txt:1-2"))
    r = coord(repo, "assign", "B", "--title", "t", "--expect", "e", "--write", "f.txt:9-10")
    assert r.code == 3 and "[ownership] serial" in r.doc["error"]["message"]
    doc = ok(coord(repo, "assign", "C", "--title", "t", "--expect", "e", "--write", "g.txt:3"))
    assert doc["task"]["grants"] == ["g.txt:3"]
    doc = ok(coord(repo, "assign", "D", "--title", "t", "--expect", "e", "--write", "g.txt:4-5"))
    assert any("touches g.txt:3 of C" in w for w in doc["warnings"])


def test_grant_widens_a_task_so_its_edit_past_the_range_can_be_claimed(make_repo, coord,
                                                                       worker):
    repo = make_repo({"f.txt": numbered(10)})
    ok(coord(repo, "assign", "A", "--title", "t", "--expect", "e", "--write", "f.txt:1-3"))
    ok(coord(repo, "assign", "B", "--title", "t", "--expect", "e", "--write", "f.txt:8-10"))
    ok(worker(repo, "start", "A", session=W1))
    write(repo, "f.txt", numbered(10).replace("line 3\nline 4\n", "line three\nline four\n"))
    r = worker(repo, "done", "A", session=W1)
    assert r.code == 1 and "lines 3-4" in r.doc["error"]["message"]
    r = coord(repo, "grant", "A", "--write", "f.txt:4-8")
    assert r.code == 3 and "B" in r.doc["error"]["message"]
    doc = ok(coord(repo, "grant", "A", "--write", "f.txt:4-7"))
    assert doc["task"]["grants"] == ["f.txt:1-3", "f.txt:4-7"]
    ok(worker(repo, "done", "A", session=W1))
    ok(coord(repo, "accept", "A"))
    assert git(repo, "show", "HEAD:f.txt") == (repo / "f.txt").read_text()


def test_thaw_archives_finished_work_and_the_archive_is_still_read(make_repo, coord, worker):
    repo = make_repo({"f.txt": numbered(3)})
    ok(coord(repo, "assign", "t1", "--title", "t", "--expect", "e", "--write", "f.txt"))
    ok(worker(repo, "start", "t1", session=W1))
    write(repo, "f.txt", "x\n")
    ok(worker(repo, "done", "t1", session=W1))
    sig = signal(worker, repo, W1, "coordinator@desk")
    ok(coord(repo, "signals", "--ack", sig, session=COORD))
    commit = ok(coord(repo, "accept", "t1"))["commit"]
    ok(coord(repo, "freeze"))
    assert ok(coord(repo, "thaw"))["archived"] >= 2
    state = (repo / ".git/coord/state.json").read_text()
    assert '"t1"' not in state and sig not in state
    # Its read report left inbox/cur (what every command lists) for inbox/old, where the
    # task's own lookups still find it.
    inbox_dir = repo / ".git/coord/inbox"
    assert not [n for n in os.listdir(inbox_dir / "cur") if ",task=t1," in n]
    assert [n for n in os.listdir(inbox_dir / "old") if ",task=t1," in n]
    from hunkwise import inbox

    assert [e.folder for e in inbox.find_task_reports(inbox_dir, "t1")] == ["old"]
    assert sig in ok(coord(repo, "index", "--all"))["markdown"]
    assert sig not in ok(coord(repo, "index"))["markdown"]
    # An archived id is still taken, and an archived task can still be reverted.
    assert coord(repo, "assign", "t1", "--title", "t", "--expect", "e", "--write", "f.txt").code == 3
    assert git(repo, "rev-parse", "HEAD").strip() == commit


def test_an_older_state_is_migrated_and_a_newer_one_refused(make_repo, coord):
    import json

    repo = make_repo({"f.txt": numbered(3)})
    ok(coord(repo, "assign", "t1", "--title", "t", "--expect", "e", "--write", "f.txt"))
    path = repo / ".git/coord/state.json"
    doc = json.loads(path.read_text())
    doc["version"] = 1
    path.write_text(json.dumps(doc))
    assert [t["id"] for t in ok(coord(repo, "status"))["tasks"]] == ["t1"]
    doc["version"] = 99
    path.write_text(json.dumps(doc))
    r = coord(repo, "status")
    assert r.code == 2 and "newer hunkwise" in r.doc["error"]["message"]


def test_a_worker_amends_its_pending_report_with_a_new_revision(make_repo, coord, worker):
    repo = make_repo({"f.txt": numbered(3)})
    ok(coord(repo, "assign", "t1", "--title", "t", "--expect", "e", "--write", "f.txt"))
    ok(worker(repo, "start", "t1", session=W1))
    write(repo, "f.txt", "first try\n")
    assert ok(worker(repo, "done", "t1", session=W1))["report"]["revision"] == 1
    r = worker(repo, "start", "t1", session=W1)
    assert r.code == 3 and "worker done t1 again" in r.doc["error"]["message"]
    write(repo, "f.txt", "second try\n")
    assert ok(worker(repo, "done", "t1", session=W1))["report"]["revision"] == 2
    assert worker(repo, "done", "t1", session=W2).code == 3  # not the holder
    rows = ok(coord(repo, "inbox"))["reports"]
    assert [(r["task_id"], r["revision"]) for r in rows] == [("t1", 2)]
    n = ok(coord(repo, "next"))["next"]
    assert n["report"]["revision"] == 2 and n["validation"]["ok"]
    # Taken for review: no more amending, and both commands say the same thing.
    r1, r2 = worker(repo, "done", "t1", session=W1), worker(repo, "start", "t1", session=W1)
    assert r1.code == r2.code == 3
    assert "taken for review" in r1.doc["error"]["message"]
    assert "taken for review" in r2.doc["error"]["message"]
    ok(coord(repo, "accept", "t1"))
    assert git(repo, "show", "HEAD:f.txt") == "second try\n"


def test_ask_blocked_decide_then_the_task_starts_again_with_the_answer(make_repo, coord,
                                                                      worker):
    repo = make_repo({"f.txt": numbered(3)})
    ok(coord(repo, "assign", "t1", "--title", "t", "--expect", "e", "--write", "f.txt"))
    ok(worker(repo, "start", "t1", session=W1))
    dec = ok(worker(repo, "ask", "t1", "--question", "Drop Python 3.10?", "--kind", "scope",
                    session=W1))["decision"]["id"]
    ok(worker(repo, "blocked", "t1", "--reason", f"waiting for {dec}", session=W1))
    ok(coord(repo, "next"))
    doc = ok(coord(repo, "decide", dec, "--answer", "Yes, drop it"))
    assert doc["reopened"] == "t1"
    started = ok(worker(repo, "start", "t1", session=W1))
    assert started["task"]["state"] == "in_progress"
    assert any("Yes, drop it" in n["text"] for n in started["notes"])
    write(repo, "f.txt", "done now\n")
    ok(worker(repo, "done", "t1", session=W1))
    ok(coord(repo, "accept", "t1"))
