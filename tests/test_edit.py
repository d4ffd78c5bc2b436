"""A brief of its own (`coord assign --brief-file`, `--brief -`), checks from a file
(`--check-file`), and `coord edit` of a task that is not accepted or rejected."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
from hunkwise.shared.state.models import MAX_BRIEF

from testing.cli import Cli, ok
from testing.repo import MakeRepo, numbered, write

BRIEF = "Put it right after partition_all.\nKeep lines under 88 columns.\nSECRET-PLAN-WORDS\n"


@pytest.fixture
def repo(make_repo: MakeRepo) -> Path:
    return make_repo({"f.txt": numbered(10), "ok.flag": "yes\n"})


def assign(coord: Cli, repo: Path, tid: str, *extra: str) -> object:
    return coord(repo, "assign", tid, "--title", "Do it", "--expect", "It is done",
                 "--write", "f.txt", *extra)


def test_the_brief_reaches_the_worker_and_never_comes_back(coord: Cli, worker: Cli, repo: Path,
                                                           tmp_path: Path) -> None:
    brief = tmp_path / "brief.md"
    brief.write_text(BRIEF)
    assigned = assign(coord, repo, "A", "--brief-file", str(brief))
    assert ok(assigned) and "SECRET" not in assigned.stdout  # type: ignore[attr-defined]
    doc = ok(worker(repo, "start", "A"))
    assert doc["brief"] == BRIEF
    text = worker(repo, "start", "A", session=doc["session"], json_out=False).stdout
    assert "brief:\n  Put it right after partition_all.\n  Keep lines under 88 columns." in text
    write(repo, "f.txt", numbered(10).replace("line 3\n", "line three\n"))
    ok(worker(repo, "done", "A", "--summary", "renamed line 3", session=doc["session"]))
    for args in (("status",), ("inbox",)):
        assert "SECRET" not in coord(repo, *args).stdout
        assert "SECRET" not in coord(repo, *args, json_out=False).stdout
    served = coord(repo, "next")
    assert "SECRET" not in served.stdout and ok(served)["next"]["validation"]["ok"]


def test_the_brief_from_stdin(coord: Cli, worker: Cli, repo: Path,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(BRIEF.encode())))
    ok(assign(coord, repo, "A", "--brief", "-"))
    assert ok(worker(repo, "start", "A"))["brief"] == BRIEF


def test_a_brief_over_the_cap_is_refused_and_nothing_is_assigned(coord: Cli, repo: Path,
                                                                 tmp_path: Path) -> None:
    big = tmp_path / "big.md"
    big.write_bytes(b"x" * (MAX_BRIEF + 1))
    r = assign(coord, repo, "A", "--brief-file", str(big))
    assert r.code == 2 and "64 KiB" in r.doc["error"]["message"]  # type: ignore[attr-defined]
    assert ok(coord(repo, "status"))["tasks"] == []
    big.write_bytes(b"x" * MAX_BRIEF)
    ok(assign(coord, repo, "A", "--brief-file", str(big)))
    missing = assign(coord, repo, "B", "--brief-file", str(tmp_path / "nope.md"))
    assert missing.code == 2  # type: ignore[attr-defined]


def test_checks_from_a_file_keep_their_quotes(coord: Cli, repo: Path, tmp_path: Path) -> None:
    checks = tmp_path / "checks.txt"
    checks.write_text("# the targeted checks\n\ngrep -q \"yes\" ok.flag\n  test -s 'f.txt'  \n")
    doc = ok(assign(coord, repo, "A", "--check", "true", "--check-file", str(checks)))
    assert doc["task"]["checks"] == ["true", 'grep -q "yes" ok.flag', "test -s 'f.txt'"]


def test_edit_changes_the_task_and_signals_its_worker(coord: Cli, worker: Cli, repo: Path,
                                                      tmp_path: Path) -> None:
    ok(assign(coord, repo, "A", "--check", "grep -q 'yess' ok.flag"))  # a typo in a check
    sess = ok(worker(repo, "start", "A"))["session"]
    brief = tmp_path / "brief.md"
    brief.write_text("new instructions\n")
    doc = ok(coord(repo, "edit", "A", "--check", "grep -q 'yes' ok.flag", "--title", "Do it well",
                   "--brief-file", str(brief)))
    assert doc["changed"] == ["title", "brief", "checks"]
    assert doc["task"]["checks"] == ["grep -q 'yes' ok.flag"]
    beat = ok(worker(repo, "heartbeat", "A", session=sess))
    assert [c["type"] for c in beat["changed"]] == ["TASK_CHANGED"]
    assert "TASK_CHANGED" in worker(repo, "heartbeat", "A", session=sess, json_out=False).stdout
    sigs = ok(worker(repo, "signals", session=sess))["signals"]
    assert [(s["type"], s["about"]) for s in sigs] == [("TASK_CHANGED", "A")]
    assert "title, brief, checks" in sigs[0]["payload"]
    again = ok(worker(repo, "start", "A", session=sess))
    assert again["task"]["title"] == "Do it well" and again["brief"] == "new instructions\n"
    assert any(n["kind"] == "edit" for n in again["notes"])
    # the fixed check now passes at worker done
    write(repo, "f.txt", "changed\n")
    ok(worker(repo, "done", "A", session=sess))


def test_edit_no_checks_and_bad_edits(coord: Cli, worker: Cli, repo: Path) -> None:
    ok(assign(coord, repo, "A", "--check", "true"))
    assert ok(coord(repo, "edit", "A", "--no-checks"))["task"]["checks"] == []
    assert coord(repo, "edit", "A", "--no-checks", "--check", "true").code == 2
    assert coord(repo, "edit", "A").code == 2                    # nothing to change
    assert coord(repo, "edit", "nope", "--title", "x").code == 2  # unknown task
    assert coord(repo, "edit", "A", "--title", " ").code == 2
    assert ok(coord(repo, "edit", "A", "--title", "Do it"))["changed"] == []
    ok(coord(repo, "reject", "A", "--note", "not needed"))
    r = coord(repo, "edit", "A", "--title", "again")
    assert r.code == 3 and "rejected" in r.doc["error"]["message"]


def test_a_brief_is_kept_only_when_set(coord: Cli, repo: Path, tmp_path: Path) -> None:
    ok(assign(coord, repo, "A"))
    state = json.loads((repo / ".git" / "coord" / "state.json").read_text())
    assert "brief" not in state["tasks"]["A"]
