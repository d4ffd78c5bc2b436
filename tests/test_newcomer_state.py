"""A hand-edited state.json is refused on load with the reason, never a traceback."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from testing.cli import Cli, error_message, ok
from testing.repo import MakeRepo


def _state_file(repo: Path) -> Path:
    return repo / ".git" / "coord" / "state.json"


def _with_task(coord: Cli, make_repo: MakeRepo) -> Path:
    repo = make_repo({"a.txt": "a\n"})
    ok(coord(repo, "assign", "t1", "--title", "T", "--expect", "E", "--write", "a.txt"))
    return repo


def _edit(repo: Path, change) -> None:  # type: ignore[no-untyped-def]
    doc = json.loads(_state_file(repo).read_text())
    change(doc)
    _state_file(repo).write_text(json.dumps(doc))


@pytest.mark.parametrize(("change", "reason"), [
    (lambda d: d["tasks"]["t1"]["grants"][0].update(path="../../etc"), "'..' would leave"),
    (lambda d: d["tasks"]["t1"]["grants"][0].update(path="/etc/passwd"), "absolute paths"),
    (lambda d: d["tasks"]["t1"]["grants"][0].update(path=".git/hooks/x"), "inside .git"),
    (lambda d: d["tasks"]["t1"]["grants"][0].update(kind="range", start=5, end=2),
     "not a range"),
    (lambda d: d["tasks"].update(t2=d["tasks"].pop("t1")), "filed as 't2' has the id 't1'"),
    (lambda d: d["tasks"]["t1"].update(id="../x") or d["tasks"].update({"../x": d["tasks"].pop("t1")}),
     "malformed task id"),
])
def test_a_hand_edited_state_is_refused_with_the_reason(coord: Cli, worker: Cli,
                                                        make_repo: MakeRepo, change,  # type: ignore[no-untyped-def]
                                                        reason: str) -> None:
    repo = _with_task(coord, make_repo)
    _edit(repo, change)
    for r in (coord(repo, "status"), worker(repo, "start", "t1"), coord(repo, "status", json_out=False)):
        assert r.code == 2, r
        assert "Traceback" not in r.stderr
    msg = error_message(coord(repo, "status"))
    assert "state.json" in msg and "state refused" in msg and reason in msg
    assert "move it aside" in msg


def test_a_state_that_is_a_directory_is_a_one_line_error(coord: Cli, make_repo: MakeRepo) -> None:
    repo = _with_task(coord, make_repo)
    os.remove(_state_file(repo))
    _state_file(repo).mkdir()
    r = coord(repo, "status", json_out=False)
    assert r.code == 2
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr
    assert len(r.stderr.strip().split("\n")) == 1 and "cannot read the state" in r.stderr
    shutil.rmtree(_state_file(repo))
    assert ok(coord(repo, "status"))["tasks"] == []


def test_the_inbox_never_lists_a_report_of_no_task(coord: Cli, worker: Cli,
                                                   make_repo: MakeRepo) -> None:
    from testing.repo import write

    repo = _with_task(coord, make_repo)
    ok(worker(repo, "start", "t1", session="sess-20260101-0000-worker@m"))
    write(repo, "a.txt", "edited\n")
    ok(worker(repo, "done", "t1", session="sess-20260101-0000-worker@m"))
    # The report's task removed from the state by hand.
    _edit(repo, lambda d: d["tasks"].pop("t1"))
    assert ok(coord(repo, "inbox"))["reports"] == []
    qdir = repo / ".git" / "coord" / "inbox" / "quarantine"
    reasons = [p.read_text() for p in qdir.iterdir() if p.name.endswith(".reason")]
    assert len(reasons) == 1 and "report for unknown task t1" in reasons[0]
    assert ok(coord(repo, "next"))["next"] is None
