"""The report inbox (Maildir) and the coordinator's reading side: `coord inbox`, `next`, `review`.

Reports are produced by real `worker done` runs on real git trees; hostile or broken ones are
dropped into the inbox by hand, with names of the form the writers use
(`<time_ns>.P<pid>R<hex>.<host>,task=<id>,rev=<n>`). State lives in `.git/coord/`.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from testing.cli import Result, ok
from testing.env import ROOT
from testing.repo import git, numbered, set_line, write

SESS = "sess-20260101-0900-worker@box"


# ---- helpers ---------------------------------------------------------------------------

def inbox_dir(repo: Path, sub: str | None = None) -> Path:
    base = repo / ".git" / "coord" / "inbox"
    return base / sub if sub else base


def files_in(repo: Path, sub: str) -> list[Path]:
    d = inbox_dir(repo, sub)
    return sorted(p for p in d.iterdir() if not p.name.startswith(".")) if d.is_dir() else []


def _ctx(repo: Path):  # type: ignore[no-untyped-def]
    from hunkwise.shared.state.context import open_repo

    return open_repo(str(repo))


def core_assign(repo: Path, task_id: str, *grants: str, checks: tuple[str, ...] = ()) -> None:
    from hunkwise.coordinator import tasks

    tasks.assign(_ctx(repo), task_id=task_id, title=f"Title of {task_id}", expect="users see it",
                 writes=list(grants), checks=list(checks), exclusive=False)


def core_start(repo: Path, task_id: str, session: str = SESS) -> None:
    from hunkwise.worker import lifecycle

    lifecycle.start(_ctx(repo), task_id, session=session, role="worker")


def core_done(repo: Path, task_id: str) -> tuple[Path, dict[str, Any]]:
    from hunkwise.worker import lifecycle

    doc = lifecycle.done(_ctx(repo), task_id, session=None, summary=f"did {task_id}",
                         unfinished=[], message=None, run_checks=True)
    path = Path(doc["report"]["file"])
    return path, json.loads(path.read_bytes())


def task_states(repo: Path) -> dict[str, str]:
    from hunkwise.shared.state import store

    return {t.id: str(t.state) for t in store.load(_ctx(repo).lay).tasks.values()}


def reported_repo(make_repo: Callable[..., Path], task_id: str = "t1") -> tuple[Path, dict[str, Any]]:
    """A repo whose task `task_id` (grant app/*) edited app/main.py line 2 and reported."""
    repo = make_repo({"app/main.py": numbered(10), "other.txt": "o\n"})
    core_assign(repo, task_id, "app/*")
    core_start(repo, task_id)
    set_line(repo, "app/main.py", 2, "edited by the worker")
    _path, report = core_done(repo, task_id)
    return repo, report


def report_name(task_id: str, rev: int, t_ns: int | None = None) -> str:
    t = time.time_ns() if t_ns is None else t_ns
    return f"{t:020d}.P{os.getpid()}R{secrets.token_hex(6)}.testhost,task={task_id},rev={rev}"


def hand_out(repo: Path, task_id: str, rev: int, name: str) -> None:
    """Do what `worker done` does before delivering: the state hands out the revision and
    records the file (a revision it never handed out is quarantined as forged)."""
    from hunkwise.shared.state import store
    from hunkwise.shared.state.context import open_repo

    with store.transaction(open_repo(str(repo)).lay) as state:
        task = state.tasks.get(task_id)
        if task is not None and rev >= task.revision:
            task.revision = rev
            task.last_report = name


def drop(repo: Path, payload: bytes, task_id: str, rev: int, t_ns: int | None = None,
         handed_out: bool = False) -> Path:
    """Place a file straight into inbox/new under a valid-looking name (`handed_out`: as
    a worker delivers it, with the revision handed out by the state)."""
    p = inbox_dir(repo, "new") / report_name(task_id, rev, t_ns)
    p.write_bytes(payload)
    if handed_out:
        hand_out(repo, task_id, rev, p.name)
    return p


def deliver(repo: Path, doc: dict[str, Any]) -> Path:
    from hunkwise import inbox

    p = inbox.write_report(inbox_dir(repo), json.dumps(doc).encode(), doc["task_id"], doc["revision"])
    hand_out(repo, doc["task_id"], doc["revision"], p.name)
    return p


def revision(report: dict[str, Any], rev: int, **changes: Any) -> dict[str, Any]:
    doc = json.loads(json.dumps(report))
    doc.update(revision=rev, report_id=f"{report['report_id']}-r{rev}", **changes)
    return doc


# ---- delivery under concurrency and crashes -----------------------------------------------

N_WORKERS = 64

# Loads the worker once, then forks one process per task; each runs `worker done TASK
# --json` through main(argv) (or execs the executable, with HUNKWISE_TEST_PROCESS=1),
# leaving its output in OUT/TASK.out and .err and its exit code in OUT/codes.json. The 64
# are separate processes delivering at once, started within milliseconds of each other
# rather than spread over the seconds 64 interpreter starts take on a small machine.
FORKING_WORKERS = r"""
import contextlib, io, json, os, sys, traceback
out_dir, *tasks = sys.argv[1:]
as_process = os.environ.get("HUNKWISE_TEST_PROCESS") == "1"
from hunkwise.worker import cli, lifecycle  # noqa: F401 - loaded before the fork
children = {}
for t in tasks:
    pid = os.fork()
    if pid == 0:
        argv = ["done", t, "--json"]
        where = os.path.join(out_dir, t)
        if as_process:
            for fd, suffix in ((1, ".out"), (2, ".err")):
                os.dup2(os.open(where + suffix, os.O_WRONLY | os.O_CREAT, 0o644), fd)
            exe = os.path.join(os.path.dirname(sys.executable), "worker")
            os.execv(exe, [exe, *argv])
        out, err, code = io.StringIO(), io.StringIO(), 70
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = cli.main(argv)
        except BaseException:
            err.write(traceback.format_exc())
        finally:
            for text, suffix in ((out, ".out"), (err, ".err")):
                with open(where + suffix, "w") as f:
                    f.write(text.getvalue())
            os._exit(code)
    children[pid] = t
codes = {}
for _ in tasks:
    pid, status = os.wait()
    codes[children[pid]] = os.waitstatus_to_exitcode(status)
with open(os.path.join(out_dir, "codes.json"), "w") as f:
    json.dump(codes, f)
"""


@pytest.mark.slow
def test_64_workers_deliver_at_once(make_repo, coord, tmp_path) -> None:
    ids = [f"t{i:02d}" for i in range(N_WORKERS)]
    repo = make_repo({f"src/{t}.txt": numbered(5) for t in ids})
    for t in ids:
        core_assign(repo, t, f"src/{t}.txt")
    for i, t in enumerate(ids):
        core_start(repo, t, session=f"sess-20260101-0900-w{i}@box")
        set_line(repo, f"src/{t}.txt", 3, f"edited by {t}")
    results = tmp_path / "results"
    results.mkdir()
    subprocess.run([sys.executable, "-c", FORKING_WORKERS, str(results), *ids], cwd=repo,
                   env=dict(os.environ), check=True, timeout=180)
    codes = json.loads((results / "codes.json").read_text())
    outs = {t: ((results / f"{t}.out").read_text(), (results / f"{t}.err").read_text())
            for t in ids}
    for t, (out, err) in outs.items():
        assert codes[t] == 0, f"{t}: {out} {err}"

    from hunkwise import inbox

    new = files_in(repo, "new")
    assert len(new) == N_WORKERS
    assert files_in(repo, "tmp") == []
    by_task = {}
    for p in new:
        report = inbox.read_report(p)  # the strict reader the coordinator uses
        by_task[report.task_id] = report
    assert sorted(by_task) == ids
    for t, report in by_task.items():
        assert [c.path for c in report.changes] == [f"src/{t}.txt"]
        assert report.revision == 1
    delivered_files = {json.loads(out)["report"]["file"] for out, _err in outs.values()}
    assert delivered_files == {str(p) for p in new}
    assert set(task_states(repo).values()) == {"reported"}
    r = coord(repo, "inbox")
    assert r.code == 0
    assert sorted(row["task_id"] for row in r.doc["reports"]) == ids


_HANGING_WRITER = """
import os, sys, time
from pathlib import Path
import hunkwise.inbox.maildir as maildir

def hang(src, dst, **kw):  # the process dies here: written and fsynced, never linked into new/
    time.sleep(300)

os.link = hang
os.rename = hang
os.replace = hang
maildir.write_report(Path(sys.argv[1]), Path(sys.argv[2]).read_bytes(), sys.argv[3], int(sys.argv[4]))
"""


def test_writer_killed_between_write_and_rename_is_never_read(make_repo, coord, tmp_path: Path) -> None:
    repo, r1 = reported_repo(make_repo)
    payload = json.dumps(revision(r1, 2, summary="never delivered")).encode()
    src = tmp_path / "payload.json"
    src.write_bytes(payload)
    child = subprocess.Popen([sys.executable, "-c", _HANGING_WRITER, str(inbox_dir(repo)), str(src),
                              "t1", "2"], cwd=ROOT)
    try:
        deadline = time.monotonic() + 30
        while True:
            written = [p for p in files_in(repo, "tmp") if p.stat().st_size == len(payload)]
            if written or time.monotonic() > deadline or child.poll() is not None:
                break
            time.sleep(0.02)
        assert written, "the writer never wrote its tmp file"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
    assert child.returncode == -signal.SIGKILL
    leftover = written[0]
    assert leftover.exists()
    assert len(files_in(repo, "new")) == 1

    r = coord(repo, "inbox")
    assert r.code == 0
    assert [(row["task_id"], row["revision"]) for row in r.doc["reports"]] == [("t1", 1)]
    n = coord(repo, "next")
    assert n.code == 0
    assert n.doc["next"]["report"]["revision"] == 1
    assert n.doc["next"]["report"]["summary"] != "never delivered"
    assert coord(repo, "next").doc == {"next": None, "pending": 0}
    # The coordinator never moved the half-delivered file anywhere.
    assert leftover.exists()
    assert all(p.name != leftover.name for p in files_in(repo, "cur") + files_in(repo, "quarantine"))


def test_partial_file_in_tmp_is_ignored(make_repo, coord) -> None:
    repo, r1 = reported_repo(make_repo)
    whole = json.dumps(revision(r1, 2)).encode()
    (inbox_dir(repo, "tmp") / report_name("t1", 2)).write_bytes(whole[: len(whole) // 2])
    r = coord(repo, "inbox")
    assert r.code == 0
    assert [row["revision"] for row in r.doc["reports"]] == [1]
    n = coord(repo, "next")
    assert n.code == 0 and n.doc["next"]["report"]["revision"] == 1
    assert files_in(repo, "quarantine") == []


def test_deliver_never_overwrites_and_leaves_nothing_in_tmp(make_repo) -> None:
    from hunkwise import inbox

    repo, r1 = reported_repo(make_repo)
    payload = json.dumps(r1).encode()
    paths = {inbox.write_report(inbox_dir(repo), payload, "t1", 1) for _ in range(20)}
    assert len(paths) == 20
    assert len(files_in(repo, "new")) == 21
    assert files_in(repo, "tmp") == []
    assert all(p.read_bytes() == payload for p in paths)


def test_deliver_refuses_oversized_payload(make_repo) -> None:
    from hunkwise import inbox
    from hunkwise.shared.errors import UsageError

    repo, _ = reported_repo(make_repo)
    with pytest.raises(UsageError):
        inbox.write_report(inbox_dir(repo), b" " * (inbox.MAX_REPORT_BYTES + 1), "t1", 2)
    assert len(files_in(repo, "new")) == 1
    assert files_in(repo, "tmp") == []


# ---- hostile and broken reports are quarantined -----------------------------------------

def _bad(report: dict[str, Any], case: str, task_id: str) -> bytes:
    doc = revision(report, 1, task_id=task_id)
    if case == "truncated":
        text = json.dumps(doc)
        return text[: len(text) // 2].encode()
    if case == "missing-fields":
        return json.dumps({"schema_version": 1, "task_id": task_id, "status": "done",
                           "revision": 1}).encode()
    if case == "unknown-key":
        doc["run_this"] = "rm -rf /"
        return json.dumps(doc).encode()
    if case == "wrong-type":
        doc["changes"] = "everything"
        return json.dumps(doc).encode()
    if case == "future-schema":
        doc["schema_version"] = 2
        return json.dumps(doc).encode()
    if case == "bad-digest":
        doc["changes"][0]["hunks"][0]["sha256"] = "not-a-digest"
        return json.dumps(doc).encode()
    if case == "duplicate-keys":
        text = json.dumps(doc)
        return (text[:-1] + ', "status": "done"}').encode()
    if case == "parent-path":
        doc["changes"][0]["path"] = "../../etc/passwd"
        return json.dumps(doc).encode()
    if case == "renamed-from-outside":
        doc["changes"][0].update(kind="renamed", old_path="app/../../../secret", hunks=[])
        return json.dumps(doc).encode()
    if case == "absolute-path":
        doc["changes"][0]["path"] = "/etc/passwd"
        return json.dumps(doc).encode()
    if case == "inside-dot-git":
        doc["changes"][0]["path"] = ".git/hooks/pre-commit"
        return json.dumps(doc).encode()
    if case == "oversized":
        return json.dumps(doc).encode() + b" " * (16 * 1024 * 1024 + 1)
    if case == "nan":
        doc["checks"] = [{"command": "pytest", "exit_code": 0, "passed": True,
                          "duration_s": float("nan"), "output_tail": ""}]
        text = json.dumps(doc)
        assert "NaN" in text
        return text.encode()
    if case == "not-utf8":
        return json.dumps(doc).encode().replace(b"did ", b"did \xff\xfe ")
    if case == "not-an-object":
        return b"[1, 2, 3]"
    if case == "deeply-nested":
        return b"[" * 200_000 + b"]" * 200_000
    if case == "infinite-number":
        doc["checks"] = [{"command": "pytest", "exit_code": 0, "passed": True,
                          "duration_s": 1e999, "output_tail": ""}]
        return json.dumps(doc).replace("Infinity", "1e999").encode()
    raise AssertionError(case)


BAD_CASES = ["truncated", "missing-fields", "unknown-key", "wrong-type", "future-schema",
             "bad-digest", "duplicate-keys",
             "parent-path", "renamed-from-outside", "absolute-path", "inside-dot-git",
             "oversized", "nan", "infinite-number", "not-utf8", "not-an-object", "deeply-nested"]


@pytest.mark.parametrize("case", BAD_CASES)
def test_malformed_report_is_quarantined_and_good_ones_still_served(make_repo, coord, case: str) -> None:
    repo, good = reported_repo(make_repo)
    core_assign(repo, "bad", "other.txt")  # a real task: only the file itself is wrong
    bad = drop(repo, _bad(good, case, "bad"), "bad", 1, t_ns=time.time_ns() - 10**9)

    r = coord(repo, "inbox")
    assert r.code == 0, r.stdout + r.stderr
    assert [(row["task_id"], row["revision"]) for row in r.doc["reports"]] == [("t1", 1)]
    assert not bad.exists()
    quarantined = inbox_dir(repo, "quarantine") / bad.name
    assert quarantined.is_file()
    reason = (inbox_dir(repo, "quarantine") / (bad.name + ".reason")).read_text()
    assert reason.strip()

    n = coord(repo, "next")
    assert n.code == 0, n.stdout + n.stderr
    assert n.doc["next"]["report"]["task_id"] == "t1"
    assert n.doc["next"]["validation"]["ok"] is True
    assert files_in(repo, "new") == []


def test_all_malformed_reports_at_once(make_repo, coord) -> None:
    repo, good = reported_repo(make_repo)
    old = time.time_ns() - 10**9
    bad = [drop(repo, _bad(good, case, f"bad{i}"), f"bad{i}", 1, t_ns=old + i)
           for i, case in enumerate(BAD_CASES)]
    odd = inbox_dir(repo, "new") / "not-a-report-name.json"
    odd.write_bytes(json.dumps(good).encode())
    n = coord(repo, "next")  # every bad file is older than the good report: met first
    assert n.code == 0, n.stdout + n.stderr
    assert n.doc["next"]["report"]["task_id"] == "t1"
    assert n.doc["pending"] == 0
    assert files_in(repo, "new") == []
    q = {p.name for p in files_in(repo, "quarantine")}
    for p in [*bad, odd]:
        assert p.name in q and p.name + ".reason" in q
    # The reason says what was wrong.
    words = {"duplicate-keys": "duplicate", "nan": "NaN", "oversized": "limit",
             "parent-path": "..", "absolute-path": "absolute", "truncated": "JSON"}
    for case, word in words.items():
        name = bad[BAD_CASES.index(case)].name
        reason = (inbox_dir(repo, "quarantine") / (name + ".reason")).read_text()
        assert word in reason, (case, reason)


def test_report_for_unknown_task_is_quarantined_by_next(make_repo, coord) -> None:
    repo, good = reported_repo(make_repo)
    ghost = drop(repo, json.dumps(revision(good, 1, task_id="ghost")).encode(), "ghost", 1,
                 t_ns=time.time_ns() - 10**9)
    n = coord(repo, "next")
    assert n.code == 0
    assert n.doc["next"]["report"]["task_id"] == "t1"
    assert (inbox_dir(repo, "quarantine") / (ghost.name + ".reason")).is_file()


def test_name_that_lies_about_its_content_is_quarantined(make_repo, coord) -> None:
    repo, good = reported_repo(make_repo)
    liar = drop(repo, json.dumps(revision(good, 7)).encode(), "t1", 9)
    r = coord(repo, "inbox")
    assert r.code == 0
    assert (inbox_dir(repo, "quarantine") / liar.name).is_file()


@pytest.mark.slow
def test_fifo_in_inbox_does_not_hang_the_coordinator(make_repo, coord) -> None:
    repo, _ = reported_repo(make_repo)
    fifo = inbox_dir(repo, "new") / report_name("ghost", 1, time.time_ns() - 10**9)
    os.mkfifo(fifo)
    r = coord(repo, "inbox", timeout=8)
    assert r.code == 0
    assert [row["task_id"] for row in r.doc["reports"]] == ["t1"]
    n = coord(repo, "next", timeout=8)
    assert n.code == 0 and n.doc["next"]["report"]["task_id"] == "t1"


def test_garbage_with_a_higher_revision_name_does_not_hide_the_real_report(make_repo, coord) -> None:
    repo, good = reported_repo(make_repo)
    drop(repo, b"{ this is not a report", "t1", 2)
    r = coord(repo, "inbox")
    assert r.code == 0
    assert [(row["task_id"], row["revision"]) for row in r.doc["reports"]] == [("t1", 1)]
    n = coord(repo, "next")
    assert n.code == 0
    assert n.doc["next"] is not None and n.doc["next"]["report"]["revision"] == 1


# ---- coord inbox / coord next ---------------------------------------------------------------

def test_empty_inbox(make_repo, coord) -> None:
    repo = make_repo({"a.txt": "a\n"})
    n = coord(repo, "next")
    assert n.code == 0
    assert n.doc == {"next": None, "pending": 0}
    r = coord(repo, "inbox")
    assert r.code == 0
    assert r.doc == {"reports": []}
    assert coord(repo, "next", json_out=False).stdout.strip() != ""


def test_next_takes_the_oldest_and_moves_it_to_cur(make_repo, coord) -> None:
    repo = make_repo({"z.txt": "z\n", "a.txt": "a\n"})
    core_assign(repo, "zeta", "z.txt")
    core_assign(repo, "alpha", "a.txt")
    core_start(repo, "zeta")
    core_start(repo, "alpha", session="sess-20260101-0900-worker.2@box")
    write(repo, "z.txt", "Z\n")
    write(repo, "a.txt", "A\n")
    zpath, _ = core_done(repo, "zeta")  # delivered first, though its id sorts last
    apath, _ = core_done(repo, "alpha")

    r = coord(repo, "inbox")
    assert r.code == 0
    rows = r.doc["reports"]
    assert [row["task_id"] for row in rows] == ["zeta", "alpha"]
    assert {k for k in ("task_id", "status", "title", "checks_passed", "checks_total",
                        "created_at")} <= set(rows[0])
    assert rows[0]["status"] == "done" and rows[0]["title"] == "Title of zeta"
    assert len(files_in(repo, "new")) == 2  # listing reads, it does not take

    first = coord(repo, "next")
    assert first.code == 0
    assert first.doc["next"]["report"]["task_id"] == "zeta"
    assert first.doc["next"]["validation"]["ok"] is True
    assert first.doc["next"]["validation"]["findings"] == []
    assert first.doc["pending"] == 1
    assert not zpath.exists() and (inbox_dir(repo, "cur") / zpath.name).is_file()
    assert [row["task_id"] for row in coord(repo, "inbox").doc["reports"]] == ["alpha"]

    second = coord(repo, "next")
    assert second.doc["next"]["report"]["task_id"] == "alpha"
    assert second.doc["pending"] == 0
    assert (inbox_dir(repo, "cur") / apath.name).is_file()

    assert coord(repo, "next").doc == {"next": None, "pending": 0}
    assert files_in(repo, "new") == []
    # A report read by next can still be reviewed.
    assert coord(repo, "review", "zeta").code == 0


def test_newer_revision_supersedes_the_older(make_repo, coord) -> None:
    repo, r1 = reported_repo(make_repo)
    [p1] = files_in(repo, "new")
    deliver(repo, revision(r1, 2, summary="second try"))

    r = coord(repo, "inbox")
    assert r.code == 0
    assert [(row["task_id"], row["revision"]) for row in r.doc["reports"]] == [("t1", 2)]
    n = coord(repo, "next")
    assert n.code == 0
    assert n.doc["next"]["report"]["revision"] == 2
    assert n.doc["next"]["report"]["summary"] == "second try"
    assert n.doc["pending"] == 0
    assert coord(repo, "next").doc == {"next": None, "pending": 0}
    assert (inbox_dir(repo, "cur") / p1.name).is_file()  # archived, not lost or quarantined
    assert files_in(repo, "quarantine") == []
    rv = coord(repo, "review", "t1")
    assert rv.code == 0 and rv.doc["revision"] == 2


def test_supersede_without_reading_first(make_repo, coord) -> None:
    repo, r1 = reported_repo(make_repo)
    deliver(repo, revision(r1, 2, summary="second"))
    deliver(repo, revision(r1, 3, summary="third"))
    n = coord(repo, "next")
    assert n.doc["next"]["report"]["summary"] == "third"
    assert coord(repo, "next").doc == {"next": None, "pending": 0}


def test_older_revision_arriving_late_never_resurfaces(make_repo, coord) -> None:
    repo, r1 = reported_repo(make_repo)
    [p1] = files_in(repo, "new")
    # Revision 2's file name carries an earlier time than revision 1's (clock step, slow link).
    drop(repo, json.dumps(revision(r1, 2, summary="newest")).encode(), "t1", 2,
         t_ns=int(p1.name.split(".")[0]) - 10**9, handed_out=True)
    n = coord(repo, "next")
    assert n.doc["next"]["report"]["revision"] == 2
    again = coord(repo, "next")
    assert again.code == 0
    assert again.doc == {"next": None, "pending": 0}, "revision 1 was served after revision 2"


# ---- coord review on real trees -------------------------------------------------------------

def codes(r: Result) -> list[str]:
    return [f["code"] for f in r.doc["findings"]]


def test_review_valid_report(make_repo, coord) -> None:
    repo, _ = reported_repo(make_repo)
    r = coord(repo, "review", "t1")
    assert r.code == 0, r.stdout + r.stderr
    assert r.doc["ok"] is True and r.doc["findings"] == []
    human = coord(repo, "review", "t1", json_out=False)
    assert human.code == 0 and "ok" in human.stdout


def test_review_unknown_task_exits_2(make_repo, coord) -> None:
    repo, _ = reported_repo(make_repo)
    r = coord(repo, "review", "nope")
    assert r.code == 2
    assert r.doc["error"]["code"] == 2


def test_review_after_further_edit_is_stale(make_repo, coord) -> None:
    repo, _ = reported_repo(make_repo)
    set_line(repo, "app/main.py", 7, "edited after the report")
    r = coord(repo, "review", "t1")
    assert r.code == 1
    assert r.doc["ok"] is False
    assert codes(r) == ["stale-report"]
    assert r.doc["findings"][0]["path"] == "app/main.py"
    n = coord(repo, "next")
    assert n.code == 0
    assert [f["code"] for f in n.doc["next"]["validation"]["findings"]] == ["stale-report"]


def test_review_after_new_file_is_unreported_change(make_repo, coord) -> None:
    repo, _ = reported_repo(make_repo)
    write(repo, "app/extra.py", "x = 1\n")
    r = coord(repo, "review", "t1")
    assert r.code == 1
    assert codes(r) == ["unreported-change"]
    assert r.doc["findings"][0]["path"] == "app/extra.py"


def test_review_after_revert_is_missing_change(make_repo, coord) -> None:
    repo, _ = reported_repo(make_repo)
    set_line(repo, "app/main.py", 2, "line 2")  # back to what HEAD holds
    assert git(repo, "status", "--porcelain") == ""
    r = coord(repo, "review", "t1")
    assert r.code == 1
    assert codes(r) == ["missing-change"]
    assert r.doc["findings"][0]["path"] == "app/main.py"


def test_review_with_staged_file_is_index_dirty(make_repo, coord) -> None:
    repo, _ = reported_repo(make_repo)
    write(repo, "other.txt", "someone staged this\n")
    git(repo, "add", "other.txt")
    r = coord(repo, "review", "t1")
    assert r.code == 1
    assert "index-dirty" in codes(r)
    assert next(f for f in r.doc["findings"] if f["code"] == "index-dirty")["path"] == "other.txt"
    git(repo, "restore", "--staged", "other.txt")
    assert coord(repo, "review", "t1").code == 0


def test_review_of_report_with_failed_check(make_repo, coord) -> None:
    repo, r1 = reported_repo(make_repo)
    deliver(repo, revision(r1, 2, checks=[{"command": "pytest -x", "exit_code": 1, "passed": False,
                                           "duration_s": 1.5, "output_tail": "1 failed"}]))
    r = coord(repo, "review", "t1")
    assert r.code == 1
    assert r.doc["revision"] == 2
    assert codes(r) == ["checks-failed"]
    assert "pytest -x" in r.doc["findings"][0]["detail"]


def test_review_of_report_claiming_a_change_outside_its_grant(make_repo, coord) -> None:
    repo, r1 = reported_repo(make_repo)
    doc = revision(r1, 2)
    doc["changes"].append({**doc["changes"][0], "path": "other.txt"})
    deliver(repo, doc)
    r = coord(repo, "review", "t1")
    assert r.code == 1
    assert "outside-grant" in codes(r)


def test_coord_inbox_sweeps_what_a_killed_writer_left_in_tmp(make_repo, coord) -> None:
    import os
    import time

    repo = make_repo({"a.txt": "1\n"})
    assert coord(repo, "init").code == 0
    tmp = repo / ".git" / "coord" / "inbox" / "tmp"
    old, fresh = tmp / "old-partial", tmp / "fresh-partial"
    old.write_bytes(b'{"half')
    fresh.write_bytes(b'{"half')
    two_days_ago = time.time() - 48 * 3600
    os.utime(old, (two_days_ago, two_days_ago))
    r = coord(repo, "inbox")
    assert r.code == 0 and r.doc["reports"] == []
    assert not old.exists() and fresh.exists()  # a writer may still be busy with a fresh one


def test_a_report_removed_from_the_inbox_is_named_and_delivered_again(make_repo, coord, worker
                                                                       ) -> None:
    """Was: a worker's script removed the inbox's files; the task stayed `reported`,
    `coord status` said `inbox: 0 pending`, and `coord accept` said only that no report
    could be read: the coordinator waited for a report that would never come. Now status
    names the task and what to do; `worker done` again delivers a new revision."""
    repo = make_repo({"b.txt": "b\n"})
    ok(coord(repo, "assign", "B", "--title", "t", "--expect", "e", "--write", "b.txt"))
    ok(worker(repo, "start", "B"))
    write(repo, "b.txt", "b\nB's line\n")
    ok(worker(repo, "done", "B"))
    assert ok(coord(repo, "status", "--json"))["reports_gone"] == []
    for p in files_in(repo, "new"):
        p.unlink()
    doc = ok(coord(repo, "status", "--json"))
    assert doc["reports_gone"] == ["B"] and doc["inbox"]["pending"] == 0
    text = coord(repo, "status", json_out=False).stdout
    assert "report gone: B" in text and "worker done B" in text
    ok(worker(repo, "done", "B"))
    assert ok(coord(repo, "status", "--json"))["reports_gone"] == []
    ok(coord(repo, "accept", "B"))
    assert git(repo, "show", "HEAD:b.txt") == "b\nB's line\n"
