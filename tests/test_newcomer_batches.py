"""After a thaw: counts that add up, and a task of an earlier batch named as such."""

from __future__ import annotations

from pathlib import Path

from testing.cli import Cli, error_message, ok
from testing.repo import MakeRepo, write

S = "sess-20260101-0000-worker@m"


def _accepted(coord: Cli, worker: Cli, repo: Path, tid: str, path: str) -> str:
    ok(coord(repo, "assign", tid, "--title", f"T {tid}", "--expect", "E", "--write", path))
    ok(worker(repo, "start", tid, session=S))
    write(repo, path, f"{tid} was here\n")
    ok(worker(repo, "done", tid, "--summary", "s", session=S))
    return str(ok(coord(repo, "accept", tid))["commit"])


def _two_batches(coord: Cli, worker: Cli, make_repo: MakeRepo) -> tuple[Path, dict[str, str]]:
    repo = make_repo({f"f{i}.txt": "x\n" for i in range(5)})
    commits = {f"t{i}": _accepted(coord, worker, repo, f"t{i}", f"f{i}.txt") for i in range(4)}
    ok(coord(repo, "freeze"))
    ok(coord(repo, "thaw"))
    ok(coord(repo, "assign", "t9", "--title", "T", "--expect", "E", "--write", "f4.txt"))
    return repo, commits


def test_status_never_counts_negatively_and_counts_the_archived(coord: Cli, worker: Cli,
                                                                 make_repo: MakeRepo) -> None:
    repo, _ = _two_batches(coord, worker, make_repo)
    everything = ok(coord(repo, "status", "--all"))
    assert sorted(t["id"] for t in everything["tasks"]) == ["t0", "t1", "t2", "t3", "t9"]
    assert everything["hidden_tasks"] == 0
    text = coord(repo, "status", "--all", json_out=False).stdout
    assert "finished task(s)" not in text and "-4" not in text
    now = ok(coord(repo, "status"))
    assert [t["id"] for t in now["tasks"]] == ["t9"]
    assert now["hidden_tasks"] == 4
    assert "(4 finished task(s) of earlier batches" in coord(repo, "status", json_out=False).stdout


def test_accept_of_a_task_of_an_earlier_batch_names_its_batch_and_commit(
        coord: Cli, worker: Cli, make_repo: MakeRepo) -> None:
    repo, commits = _two_batches(coord, worker, make_repo)
    r = coord(repo, "accept", "t1")
    assert r.code == 3, r
    msg = error_message(r)
    assert "unknown task" not in msg
    assert "accepted in batch 1" in msg and commits["t1"][:12] in msg
    for verb in (("reject", "t2", "--note", "n"), ("request-changes", "t2", "--note", "n"),
                 ("defer", "t2")):
        r = coord(repo, *verb)
        assert r.code == 3 and "accepted in batch 1" in error_message(r), (verb, r)
    r = coord(repo, "accept", "nope")
    assert r.code == 2 and "unknown task" in error_message(r)
