"""Machines coordinating through a git remote: a bare repository in a temp dir is the
remote, clones are machines (told apart by HUNKWISE_MACHINE, each with its own state)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from testing.cli import Cli, ok
from testing.machines import BUILDER, REVIEWER, Machines, built_task, desktop_and_laptop
from testing.repo import MakeRepo, git


@pytest.fixture
def machines(tmp_path: Path, make_repo: MakeRepo, coord: Cli, worker: Cli) -> Machines:
    return desktop_and_laptop(tmp_path, make_repo, coord, worker)


def remote_refs(m: Machines) -> list[str]:
    return git(m.remote, "for-each-ref", "--format=%(refname)", "refs/hunkwise/").split()


def test_machine_name_honours_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from hunkwise.shared.state.context import machine_name

    monkeypatch.setenv("HUNKWISE_MACHINE", "lap top!")
    assert machine_name() == "lap-top"
    monkeypatch.setenv("HUNKWISE_MACHINE", "laptop")
    assert machine_name() == "laptop"


def test_each_machine_pushes_only_its_own_ref(machines: Machines) -> None:
    m = machines
    ok(m.coord("desktop", "assign", "--title", "T", "--expect", "E", "--write", "app.py:1-5"))
    doc = ok(m.coord("desktop", "sync"))
    assert doc["pushed"] and doc["warnings"] == []
    ok(m.worker("laptop", "sync"))
    assert remote_refs(m) == ["refs/hunkwise/m/desktop/records"]
    ok(m.worker("laptop", "signal", "--to", "coordinator@desktop", "--type", "BLOCKED_ON",
                "--about", "task-001", session=REVIEWER))
    ok(m.worker("laptop", "sync"))
    assert remote_refs(m) == ["refs/hunkwise/m/desktop/records", "refs/hunkwise/m/laptop/records"]
    # The laptop mirrors the coordinator's tasks; it never publishes them as its own.
    tree = git(m.remote, "ls-tree", "--name-only", "refs/hunkwise/m/laptop/records").split()
    assert "tasks.json" not in tree and "signals" in tree


def test_signals_round_trip(machines: Machines) -> None:
    m = machines
    built_task(m)
    ok(m.coord("desktop", "audit", "task-001", "--roles", "review"))
    ok(m.coord("desktop", "sync"))
    ok(m.worker("laptop", "sync"))
    sigs = ok(m.worker("laptop", "signals", "--session", REVIEWER))["signals"]
    ready = [s for s in sigs if s["type"] == "READY_FOR_REVIEW"]
    assert len(ready) == 1 and ready[0]["about"] == "task-001"
    assert ready[0]["id"].endswith("@desktop")  # unique across machines
    # And back: a signal from the laptop reaches the coordinator, its id naming the laptop.
    ok(m.worker("laptop", "signal", "--to", "coordinator@desktop", "--type", "BLOCKED_ON",
                "--about", "task-001", "--payload", "need data", session=REVIEWER))
    ok(m.worker("laptop", "sync"))
    ok(m.coord("desktop", "sync"))
    rows = ok(m.coord("desktop", "signals"))["signals"]
    back = [s for s in rows if s["type"] == "BLOCKED_ON"]
    assert [(s["from"], s["payload"]) for s in back] == [(REVIEWER, "need data")]
    assert back[0]["id"].endswith("@laptop")
    # A second sync applies nothing twice.
    ok(m.coord("desktop", "sync"))
    assert len([s for s in ok(m.coord("desktop", "signals"))["signals"]
                if s["type"] == "BLOCKED_ON"]) == 1


@pytest.mark.slow
def test_review_on_the_laptop_gates_accept(machines: Machines) -> None:
    m = machines
    built_task(m)
    ok(m.coord("desktop", "audit", "task-001", "--roles", "review"))
    ok(m.coord("desktop", "next"))  # the work report; syncs by itself ([remote] name)
    r = m.coord("desktop", "accept", "task-001")
    assert r.code == 1 and "audit-pending" in r.stdout
    ok(m.worker("laptop", "sync"))
    # The laptop sees the exact patch from the pushed snapshot; its own tree stays clean.
    d = ok(m.coord("laptop", "diff", "task-001"))
    assert d["from_snapshot"]["machine"] == "desktop"
    assert "-line 2\n+hello\n" in d["patch"] and [f["path"] for f in d["files"]] == ["app.py"]
    assert git(m.repos["laptop"], "status", "--porcelain") == ""
    ok(m.worker("laptop", "start", "--role", "review", "--session", REVIEWER))
    ok(m.worker("laptop", "review", "task-001", "--verdict", "changes", "--notes", "rename",
                "--session", REVIEWER))
    ok(m.coord("desktop", "sync"))
    r = m.coord("desktop", "accept", "task-001")
    assert r.code == 1 and "audit-changes" in r.stdout
    ok(m.worker("laptop", "sync"))
    ok(m.worker("laptop", "review", "task-001", "--verdict", "approve", "--session", REVIEWER))
    inbox = ok(m.coord("desktop", "next"))  # syncs: the verdict joins the desktop's inbox
    assert inbox["next"]["report"]["kind"] == "review"
    doc = ok(m.coord("desktop", "accept", "task-001"))
    assert doc["paths"] == ["app.py"]
    assert git(m.repos["desktop"], "show", "HEAD:app.py").split("\n")[1] == "hello"


def test_snapshot_diff_on_the_coordinators_machine(machines: Machines) -> None:
    m = machines
    built_task(m)
    tree = ok(m.coord("desktop", "diff", "task-001"))
    snap = ok(m.coord("desktop", "diff", "task-001", "--from-snapshot"))
    assert snap["patch"] == tree["patch"] and snap["from_snapshot"]["machine"] == "desktop"


def forge(repo: Path, machine: str, files: dict[str, bytes]) -> None:
    """Publish hand-made records under `machine`'s ref, as a hostile clone could."""
    entries = []
    for name, data in files.items():
        oid = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo, input=data,
                             capture_output=True, check=True).stdout.decode().strip()
        entries.append(f"100644 blob {oid}\t{name}\n")
    sub = git(repo, "mktree", input="".join(entries).encode()).strip()
    top = git(repo, "mktree", input=f"040000 tree {sub}\tsignals\n".encode()).strip()
    commit = git(repo, "commit-tree", top, "-m", "forged").strip()
    git(repo, "push", "-q", "origin", f"{commit}:refs/hunkwise/m/{machine}/records")


def test_forged_records_are_quarantined(machines: Machines) -> None:
    m = machines
    ok(m.coord("desktop", "sync"))
    good = {"id": "sig-20260101-001@laptop", "from": REVIEWER, "to": "*", "type": "BLOCKED_ON",
            "about": "x", "payload": "", "state": "pending", "created_at": 1.0, "acked_by": []}
    stolen = dict(good, id="sig-20260101-002@laptop", **{"from": BUILDER})
    dupes = b'{"id": "sig-20260101-004@laptop", "id": "sig-20260101-004@laptop"}'
    forge(m.repos["laptop"], "laptop", {
        good["id"]: json.dumps(good).encode(),
        stolen["id"]: json.dumps(stolen).encode(),       # a desktop session in the laptop's ref
        "sig-20260101-003@laptop": b"{not json",
        "sig-20260101-004@laptop": dupes,
        "sig-20260101-005@desktop": json.dumps(dict(good, id="sig-20260101-005@desktop")).encode(),
    })
    doc = ok(m.coord("desktop", "sync"))
    q = {x["record"]: x["reason"] for x in doc["applied"]["quarantined"]}
    assert set(q) == {f"signals/sig-20260101-00{i}@{'desktop' if i == 5 else 'laptop'}"
                      for i in (2, 3, 4, 5)}
    assert "not on laptop" in q["signals/sig-20260101-002@laptop"]
    assert "not valid JSON" in q["signals/sig-20260101-003@laptop"]
    assert "duplicate key" in q["signals/sig-20260101-004@laptop"]
    ids = [s["id"] for s in ok(m.coord("desktop", "signals"))["signals"]]
    assert ids == ["sig-20260101-001@laptop"]
    qdir = m.repos["desktop"] / ".git" / "coord" / "inbox" / "quarantine"
    reasons = sorted(p.name for p in qdir.iterdir() if p.name.endswith(".reason"))
    assert len(reasons) == 4
    # Quarantined once, not at every sync.
    assert ok(m.coord("desktop", "sync"))["applied"]["quarantined"] == []


def test_a_forged_verdict_does_not_gate_accept(machines: Machines) -> None:
    m = machines
    built_task(m)
    ok(m.coord("desktop", "audit", "task-001", "--roles", "review"))
    ok(m.coord("desktop", "sync"))
    ok(m.worker("laptop", "sync"))
    # A laptop session answering for the desktop: the verdict's session names the desktop.
    liar = "sess-20260101-0900-review@desktop"
    ok(m.worker("laptop", "start", "--session", liar))
    r = m.worker("laptop", "review", "task-001", "--verdict", "approve", "--session", liar)
    assert r.code == 0
    ok(m.worker("laptop", "sync"))
    doc = ok(m.coord("desktop", "sync"))
    assert doc["applied"]["verdicts"] == []
    r = m.coord("desktop", "accept", "task-001")
    assert r.code == 1 and "audit-pending" in r.stdout


def test_a_failed_push_is_a_warning_and_is_retried(machines: Machines) -> None:
    m = machines
    ok(m.coord("desktop", "assign", "--title", "T", "--expect", "E", "--write", "app.py:1-5"))
    ok(m.coord("desktop", "audit", "task-001", "--roles", "test"))
    away = m.remote.with_name("away.git")
    m.remote.rename(away)
    doc = ok(m.coord("desktop", "sync"))
    assert not doc["pushed"] and any("push to origin failed" in w for w in doc["warnings"])
    assert any("fetch from origin failed" in w for w in doc["warnings"])
    # A command that syncs by itself still does its work, with a warning on stderr.
    r = m.coord("desktop", "next")
    assert r.code == 0 and "warning: push to origin failed" in r.stderr
    away.rename(m.remote)
    assert ok(m.coord("desktop", "sync"))["pushed"]
    ok(m.worker("laptop", "sync"))
    sigs = ok(m.worker("laptop", "signals", "--session", "sess-20260101-0900-test@laptop"))["signals"]
    assert [s["type"] for s in sigs] == ["READY_FOR_REVIEW"]


def test_sync_without_a_remote_is_a_usage_error(make_repo: Callable[..., Path], coord: Any) -> None:
    repo = make_repo({"a": "1\n"})
    r = coord(repo, "sync")
    assert r.code == 2 and "[remote] name" in r.doc["error"]["message"]


def test_three_machines_push_at_once(machines: Machines) -> None:
    m = machines
    m.clone("tablet")
    names = ["desktop", "laptop", "tablet"]
    for name in names:
        ok(m.worker(name, "signal", "--to", "*", "--type", "BLOCKED_ON", "--about", name,
                    session=f"sess-20260101-0900-build@{name}"))
    procs = [subprocess.Popen([str(Path(sys.executable).parent / "worker"), "sync",
                               "--json"], cwd=m.repos[n], env={**os.environ,
                                                             "HUNKWISE_MACHINE": n},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for n in names]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert json.loads(out)["pushed"], err
    assert sorted(remote_refs(m)) == [f"refs/hunkwise/m/{n}/records" for n in names]
    for name in names:
        ok(m.worker(name, "sync"))
        sess = f"sess-20260101-0901-build@{name}"
        abouts = sorted(s["about"] for s in ok(m.worker(name, "signals", "--session", sess))["signals"])
        assert abouts == sorted(names), name
    # Every push was a fast-forward: each ref's history is one chain from its first commit.
    for name in names:
        log = git(m.remote, "rev-list", "--parents", f"refs/hunkwise/m/{name}/records").split("\n")
        assert all(len(line.split()) <= 2 for line in log if line)


def tree_of(repo: Path, files: dict[str, bytes]) -> str:
    """A tree holding `files` ({path: bytes}), written through a throwaway index."""
    env = {**os.environ, "GIT_INDEX_FILE": str(repo / ".git" / "forge-index")}
    for path, data in files.items():
        oid = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo, input=data,
                             capture_output=True, check=True).stdout.decode().strip()
        subprocess.run(["git", "update-index", "--add", "--cacheinfo", f"100644,{oid},{path}"],
                       cwd=repo, env=env, check=True)
    tree = subprocess.run(["git", "write-tree"], cwd=repo, env=env, capture_output=True,
                          check=True).stdout.decode().strip()
    (repo / ".git" / "forge-index").unlink()
    return tree


def test_a_remote_verdict_speaking_for_another_machine_is_quarantined(machines: Machines) -> None:
    m = machines
    built_task(m)
    ok(m.coord("desktop", "audit", "task-001", "--roles", "review"))
    ok(m.coord("desktop", "sync"))
    ok(m.worker("laptop", "sync"))
    lap = m.repos["laptop"]
    # Published, the verdict left the laptop's queue for its cur/ (the desktop reads it).
    inbox = lap / ".git" / "coord" / "inbox" / "cur"
    # A genuine verdict of a laptop session, then rewritten to claim a desktop session,
    # published on top of the laptop's chain (a plain fast-forward) in place of the genuine
    # one, which the desktop never fetched.
    ok(m.worker("laptop", "start", "--session", REVIEWER))
    ok(m.worker("laptop", "review", "task-001", "--verdict", "approve", "--session", REVIEWER))
    (name,) = [p.name for p in inbox.iterdir()]
    doc = json.loads((inbox / name).read_bytes())
    doc["session"] = "sess-20260101-0900-review@desktop"
    bad = json.dumps(doc).encode()
    renamed = name  # the same name, its content now speaking for the desktop
    tree = tree_of(lap, {f"reports/{renamed}/report.json": bad,
                         "reports/123.P1R00.h,task=task-001,rev=7/report.json": json.dumps(
                             dict(doc, session=REVIEWER)).encode()})
    parent = git(lap, "rev-parse", "refs/hunkwise/m/laptop/records").strip()
    commit = git(lap, "commit-tree", tree, "-p", parent, "-m", "forged").strip()
    git(lap, "push", "-q", "origin", f"{commit}:refs/hunkwise/m/laptop/records")
    out = ok(m.coord("desktop", "sync"))
    q = {x["record"]: x["reason"] for x in out["applied"]["quarantined"]}
    assert "is not on laptop" in q[f"reports/{renamed}"]
    assert "content says task-001 r1" in q["reports/123.P1R00.h,task=task-001,rev=7"]
    assert out["applied"]["verdicts"] == []
    r = m.coord("desktop", "accept", "task-001")
    assert r.code == 1 and "audit-pending" in r.stdout


def test_a_remote_verdict_closes_the_request_it_answers(machines: Machines) -> None:
    m = machines
    built_task(m)
    ok(m.coord("desktop", "audit", "task-001", "--roles", "review"))
    ok(m.coord("desktop", "sync"))
    pending = [s for s in ok(m.coord("desktop", "signals"))["signals"]
               if s["type"] == "READY_FOR_REVIEW" and s["state"] == "pending"]
    assert len(pending) == 1
    ok(m.worker("laptop", "sync"))
    ok(m.worker("laptop", "start", "--role", "review", "--session", REVIEWER))
    ok(m.worker("laptop", "review", "task-001", "--verdict", "approve", "--session", REVIEWER))
    doc = ok(m.coord("desktop", "sync"))
    assert doc["applied"]["verdicts"] == ["task-001: review approve (laptop)"]
    rows = ok(m.coord("desktop", "signals"))["signals"]
    ready = [s for s in rows if s["type"] == "READY_FOR_REVIEW" and not s["id"].endswith("@laptop")]
    assert [s["state"] for s in ready] == ["delivered"]


@pytest.mark.slow
def test_compaction_keeps_every_record_readable_and_never_forces_a_push(
        machines: Machines, monkeypatch: pytest.MonkeyPatch) -> None:
    from hunkwise.shared.machines import sync

    m = machines
    # The remote refuses any non-fast-forward update: a forced push would fail here.
    git(m.remote, "config", "receive.denyNonFastForwards", "true")
    monkeypatch.setattr(sync, "COMPACT_AFTER", 3)
    built_task(m)
    ok(m.coord("desktop", "audit", "task-001", "--roles", "review"))
    for i in range(5):
        ok(m.worker("laptop", "signal", "--to", "coordinator@desktop", "--type", "BLOCKED_ON",
                    "--about", f"x{i}", session=REVIEWER))
        doc = ok(m.worker("laptop", "sync"))
        assert doc["pushed"] and doc["warnings"] == [], doc
        ok(m.coord("desktop", "sync"))
    refs = remote_refs(m)
    lap = [r for r in refs if "/laptop/" in r]
    assert len(lap) == 1 and lap[0].startswith("refs/hunkwise/m/laptop/records-"), refs
    assert [r for r in refs if "/desktop/" in r][0].startswith("refs/hunkwise/m/desktop/records-")
    # Each generation is short; the newest holds every live record.
    count = int(git(m.remote, "rev-list", "--count", lap[0]))
    assert count <= 3
    names = git(m.remote, "ls-tree", "--name-only", f"{lap[0]}:signals").split()
    assert len(names) == 5
    # Every signal reached the desktop once; nothing applied twice across generations.
    abouts = sorted(s["about"] for s in ok(m.coord("desktop", "signals"))["signals"]
                    if s["type"] == "BLOCKED_ON")
    assert abouts == [f"x{i}" for i in range(5)]
    # A fresh clone of the laptop continues its newest generation; a new machine reads all.
    m.clone("tablet")
    ok(m.worker("tablet", "sync"))
    sigs = ok(m.worker("tablet", "signals", "--session", "sess-20260101-0900-review@tablet"))
    assert [s["type"] for s in sigs["signals"]] == ["READY_FOR_REVIEW"]
    # The review cycle still works across compacted chains.
    ok(m.worker("laptop", "start", "--role", "review", "--session", REVIEWER))
    ok(m.worker("laptop", "review", "task-001", "--verdict", "approve", "--session", REVIEWER))
    ok(m.coord("desktop", "next"))
    ok(m.coord("desktop", "next"))
    assert ok(m.coord("desktop", "accept", "task-001"))["paths"] == ["app.py"]
