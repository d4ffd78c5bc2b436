"""The worker's side: claiming a task, and the report `worker done` builds from the real tree.

Sessions, claims and checks are driven through the `worker` CLI. The report's contents for
every kind of change are checked on real git trees; most of those tests call the core
functions in-process (the same code the CLI runs) to stay fast, and read the report file
the inbox actually received.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from testing.cli import Cli, Result
from testing.repo import git, numbered, set_line, write

SESSION_RE = re.compile(r"^sess-(\d{8})-(\d{4})-([A-Za-z0-9_.-]+)@([A-Za-z0-9_.-]+)$")
SESS_A = "sess-20260101-0900-worker@box-a"
SESS_B = "sess-20260101-0901-worker@box-b"



# ---- helpers ---------------------------------------------------------------------------

def inbox_dir(repo: Path, sub: str = "new") -> Path:
    return repo / ".git" / "coord" / "inbox" / sub


def inbox_files(repo: Path, sub: str = "new") -> list[Path]:
    d = inbox_dir(repo, sub)
    return sorted(p for p in d.iterdir() if not p.name.startswith(".")) if d.is_dir() else []


def task_state(repo: Path, task_id: str) -> dict[str, Any]:
    """The task as the state holds it (read in-process: `coord status` is driven elsewhere)."""
    from hunkwise.shared.state import store

    ctx = _ctx(repo)
    return store.load(ctx.lay).tasks[task_id].public()


def cli_assign(coord: Cli, repo: Path, task_id: str, *grants: str, checks: tuple[str, ...] = ()) -> None:
    args = ["assign", task_id, "--title", f"Title of {task_id}", "--expect", "users see it"]
    for g in grants:
        args += ["--write", g]
    for c in checks:
        args += ["--check", c]
    r = coord(repo, *args)
    assert r.code == 0, r.stdout + r.stderr


def delivered(r: Result) -> dict[str, Any]:
    """The report file that `worker done --json` says it delivered, parsed."""
    assert r.code == 0, r.stdout + r.stderr
    path = Path(r.doc["report"]["file"])
    assert path.parent.name == "new" and path.is_file()
    return json.loads(path.read_bytes())


# In-process core calls: the same functions the CLI runs, without interpreter start-up.

def _ctx(repo: Path):  # type: ignore[no-untyped-def]
    from hunkwise.shared.state.context import open_repo

    return open_repo(str(repo))


def core_assign(repo: Path, task_id: str, *grants: str, checks: tuple[str, ...] = ()) -> None:
    from hunkwise.coordinator import tasks

    tasks.assign(_ctx(repo), task_id=task_id, title=f"Title of {task_id}", expect="users see it",
                 writes=list(grants), checks=list(checks), exclusive=False)


def core_start(repo: Path, task_id: str, session: str | None = SESS_A) -> dict[str, Any]:
    from hunkwise.worker import lifecycle

    return lifecycle.start(_ctx(repo), task_id, session=session, role="worker")


def core_done(repo: Path, task_id: str) -> dict[str, Any]:
    from hunkwise.worker import lifecycle

    doc = lifecycle.done(_ctx(repo), task_id, session=None, summary="s", unfinished=[],
                         message=None, run_checks=True)
    return json.loads(Path(doc["report"]["file"]).read_bytes())


def core_review(repo: Path, task_id: str) -> dict[str, Any]:
    from hunkwise.coordinator import review

    return review.review(_ctx(repo), task_id)


def started(make_repo: Callable[..., Path], files: dict[str, str | bytes], *grants: str,
            task_id: str = "t1") -> Path:
    repo = make_repo(files)
    core_assign(repo, task_id, *grants)
    core_start(repo, task_id)
    return repo


def change(report: dict[str, Any], path: str) -> dict[str, Any]:
    found = [c for c in report["changes"] if c["path"] == path]
    assert len(found) == 1, f"{path} not exactly once in {[c['path'] for c in report['changes']]}"
    return found[0]


def ranges(entry: dict[str, Any]) -> list[tuple[int, int, int, int]]:
    return [(h["old_start"], h["old_lines"], h["new_start"], h["new_lines"]) for h in entry["hunks"]]


# ---- worker start: sessions and claims -------------------------------------------------

def test_start_gives_session_id_of_the_documented_form(make_repo, coord, worker) -> None:
    repo = make_repo({"a.txt": "a\n"})
    core_assign(repo, "t1", "a.txt")
    before = dt.datetime.now()
    r = worker(repo, "start", "t1", "--role", "builder")
    assert r.code == 0, r.stderr
    m = SESSION_RE.match(r.doc["session"])
    assert m, r.doc["session"]
    stamp = dt.datetime.strptime(m[1] + m[2], "%Y%m%d%H%M")
    assert abs((stamp - before.replace(second=0, microsecond=0)).total_seconds()) <= 120
    assert m[3].split(".")[0] == "builder"
    assert r.doc["task"]["state"] == "in_progress"
    assert r.doc["task"]["session"] == r.doc["session"]
    st = coord(repo, "status")
    assert st.code == 0, st.stderr
    [row] = st.doc["tasks"]
    assert (row["id"], row["state"], row["session"], row["stale"]) == \
        ("t1", "in_progress", r.doc["session"], False)


def test_two_starts_in_the_same_minute_get_different_session_ids(make_repo, worker) -> None:
    repo = make_repo({"a.txt": "a\n", "b.txt": "b\n"})
    core_assign(repo, "t1", "a.txt")
    core_assign(repo, "t2", "b.txt")
    s1 = worker(repo, "start", "t1").doc["session"]
    s2 = worker(repo, "start", "t2").doc["session"]
    assert SESSION_RE.match(s1) and SESSION_RE.match(s2)
    assert s1 != s2


def test_new_sessions_within_one_minute_never_collide(make_repo, monkeypatch) -> None:
    # Pin the clock so the collision path is taken deterministically.
    import hunkwise.shared.state.context as context

    class Frozen(dt.datetime):
        @classmethod
        def now(cls, tz=None):  # type: ignore[no-untyped-def, override]
            return cls(2026, 3, 4, 5, 6, 7)

    monkeypatch.setattr(context, "dt", SimpleNamespace(datetime=Frozen, timezone=dt.timezone))
    repo = make_repo({f"f{i}.txt": "x\n" for i in range(3)})
    for i in range(3):
        core_assign(repo, f"t{i}", f"f{i}.txt")
    ids = [core_start(repo, f"t{i}", session=None)["session"] for i in range(3)]
    assert len(set(ids)) == 3, ids
    for s in ids:
        m = SESSION_RE.match(s)
        assert m and m[1] == "20260304" and m[2] == "0506", s


def test_session_option_is_honoured_through_to_the_report(make_repo, worker) -> None:
    repo = make_repo({"a.txt": "a\n"})
    core_assign(repo, "t1", "a.txt")
    r = worker(repo, "start", "t1", "--session", SESS_A)
    assert r.code == 0, r.stderr
    assert r.doc["session"] == SESS_A
    assert task_state(repo, "t1")["session"] == SESS_A
    write(repo, "a.txt", "A\n")
    report = delivered(worker(repo, "done", "t1", "--session", SESS_A))
    assert report["session"] == SESS_A


def test_coord_session_environment_is_honoured(make_repo, worker) -> None:
    repo = make_repo({"a.txt": "a\n"})
    core_assign(repo, "t1", "a.txt")
    r = worker(repo, "start", "t1", session=SESS_B)
    assert r.code == 0, r.stderr
    assert r.doc["session"] == SESS_B
    write(repo, "a.txt", "A\n")
    report = delivered(worker(repo, "done", "t1", session=SESS_B))
    assert report["session"] == SESS_B


def test_malformed_session_id_is_refused_with_exit_2(make_repo, worker) -> None:
    repo = make_repo({"a.txt": "a\n"})
    core_assign(repo, "t1", "a.txt")
    r = worker(repo, "start", "t1", "--session", "bob")
    assert r.code == 2
    assert r.doc["error"]["code"] == 2
    assert task_state(repo, "t1")["state"] == "assigned"


def test_second_session_cannot_take_a_live_claim(make_repo, worker) -> None:
    repo = make_repo({"a.txt": "a\n"})
    core_assign(repo, "t1", "a.txt")
    assert worker(repo, "start", "t1", "--session", SESS_A).code == 0
    r = worker(repo, "start", "t1", "--session", SESS_B)
    assert r.code == 3, r.stdout + r.stderr
    assert r.doc["error"]["code"] == 3
    assert task_state(repo, "t1")["session"] == SESS_A
    # The holder itself may resume its own claim.
    assert worker(repo, "start", "t1", "--session", SESS_A).code == 0
    # Nor may another session deliver for it.
    write(repo, "a.txt", "A\n")
    r = worker(repo, "done", "t1", "--session", SESS_B)
    assert r.code == 3, r.stdout + r.stderr
    assert inbox_files(repo) == []
    assert task_state(repo, "t1")["state"] == "in_progress"


@pytest.mark.parametrize("task_id", ["nope", "../etc"])
def test_start_on_unknown_or_malformed_task_exits_2(make_repo, worker, task_id: str) -> None:
    repo = make_repo({"a.txt": "a\n"})
    core_assign(repo, "t1", "a.txt")
    r = worker(repo, "start", task_id)
    assert r.code == 2, r.stdout + r.stderr
    assert r.doc["error"]["code"] == 2
    assert task_state(repo, "t1")["state"] == "assigned"


# ---- worker done: checks -----------------------------------------------------------------

def test_done_with_failing_check_exits_1_and_delivers_nothing(make_repo, coord, worker) -> None:
    repo = make_repo({"a.txt": "a\n"})
    core_assign(repo, "t1", "a.txt", checks=("echo fine", "echo broken; exit 3"))
    assert worker(repo, "start", "t1", "--session", SESS_A).code == 0
    write(repo, "a.txt", "A\n")
    r = worker(repo, "done", "t1")
    assert r.code == 1, r.stdout + r.stderr
    assert r.doc["error"]["code"] == 1
    assert "exit 3" in r.doc["error"]["message"]
    assert inbox_files(repo, "new") == []
    assert inbox_files(repo, "tmp") == []
    st = task_state(repo, "t1")
    assert st["state"] == "in_progress"
    assert st["revision"] == 0
    assert coord(repo, "inbox").doc["reports"] == []


def test_done_records_passing_checks(make_repo, worker) -> None:
    repo = make_repo({"a.txt": "a\n"})
    core_assign(repo, "t1", "a.txt",
               checks=("echo hello-from-check", "sleep 0.3; echo on-stderr >&2"))
    assert worker(repo, "start", "t1", "--session", SESS_A).code == 0
    write(repo, "a.txt", "A\n")
    r = worker(repo, "done", "t1")
    report = delivered(r)
    assert r.doc["report"]["checks_passed"] == 2 and r.doc["report"]["checks_total"] == 2
    first, second = report["checks"]
    assert first["command"] == "echo hello-from-check"
    assert first["exit_code"] == 0 and first["passed"] is True
    assert "hello-from-check" in first["output_tail"]
    assert 0 <= first["duration_s"] < 30
    assert second["exit_code"] == 0 and second["passed"] is True
    assert "on-stderr" in second["output_tail"]
    assert second["duration_s"] >= 0.3
    assert task_state(repo, "t1")["state"] == "reported"


def test_output_tail_keeps_the_end_of_long_output(make_repo, worker) -> None:
    repo = make_repo({"a.txt": "a\n"})
    core_assign(repo, "t1", "a.txt",
               checks=("i=0; while [ $i -lt 3000 ]; do echo filler-line-$i; i=$((i+1)); done; echo LAST-LINE",))
    assert worker(repo, "start", "t1", "--session", SESS_A).code == 0
    write(repo, "a.txt", "A\n")
    check = delivered(worker(repo, "done", "t1"))["checks"][0]
    assert check["output_tail"].rstrip().endswith("LAST-LINE")
    assert "filler-line-0\n" not in check["output_tail"]


def test_no_run_checks_skips_the_checks(make_repo, worker, tmp_path: Path) -> None:
    marker = tmp_path / "check-ran"
    repo = make_repo({"a.txt": "a\n"})
    core_assign(repo, "t1", "a.txt", checks=(f"touch '{marker}'; false",))
    assert worker(repo, "start", "t1", "--session", SESS_A).code == 0
    write(repo, "a.txt", "A\n")
    report = delivered(worker(repo, "done", "t1", "--no-run-checks"))
    assert report["checks"] == []
    assert not marker.exists()
    assert task_state(repo, "t1")["state"] == "reported"


def test_done_options_reach_the_report(make_repo, worker) -> None:
    repo = make_repo({"a.txt": "a\n"})
    core_assign(repo, "t1", "a.txt")
    assert worker(repo, "start", "t1", "--session", SESS_A).code == 0
    write(repo, "a.txt", "A\n")
    report = delivered(worker(repo, "done", "t1", "--summary", "made it loud",
                              "--unfinished", "docs", "--unfinished", "i18n",
                              "--commit-message", "Shout a\n\nBecause users asked."))
    assert report["schema_version"] == 1
    assert report["task_id"] == "t1" and report["status"] == "done"
    assert report["summary"] == "made it loud"
    assert report["unfinished"] == ["docs", "i18n"]
    assert report["proposed_commit"] == {"subject": "Shout a", "body": "Because users asked."}
    assert report["title"] == "Title of t1" and report["expect"] == "users see it"
    assert report["revision"] == 1
    assert report["base_commit"] == git(repo, "rev-parse", "HEAD").strip()
    # The snapshot is a real tree holding the edit, kept reachable.
    assert git(repo, "cat-file", "-p", f"{report['snapshot']}:a.txt") == "A\n"
    assert report["snapshot"] in git(repo, "for-each-ref", "--format=%(objectname)", "refs/hunkwise/")
    # A second `done` while the report is pending amends it: a new revision supersedes
    # the first (the coordinator reads only the newest).
    again = delivered(worker(repo, "done", "t1"))
    assert again["revision"] == 2
    assert len(inbox_files(repo)) == 2


def test_done_before_start_is_refused(make_repo, worker) -> None:
    repo = make_repo({"a.txt": "a\n"})
    core_assign(repo, "t1", "a.txt")
    write(repo, "a.txt", "A\n")
    r = worker(repo, "done", "t1")
    assert r.code == 3, r.stdout + r.stderr
    assert inbox_files(repo) == []
    assert task_state(repo, "t1")["state"] == "assigned"


@pytest.mark.parametrize("status", ["blocked", "failed"])
def test_blocked_or_failed_report_is_not_done_on_review(make_repo, coord, worker, status: str) -> None:
    repo = make_repo({"a.txt": "a\n"})
    core_assign(repo, "t1", "a.txt", checks=("false",))
    assert worker(repo, "start", "t1", "--session", SESS_A).code == 0
    write(repo, "a.txt", "half\n")
    report = delivered(worker(repo, status, "t1", "--reason", "the API key is missing"))
    assert report["status"] == status
    assert report["reason"] == "the API key is missing"
    assert task_state(repo, "t1")["state"] == "reported"
    r = coord(repo, "review", "t1")
    assert r.code == 1, r.stdout + r.stderr
    assert r.doc["ok"] is False
    assert "not-done" in [f["code"] for f in r.doc["findings"]]


def test_blocked_needs_a_reason(make_repo, worker) -> None:
    repo = make_repo({"a.txt": "a\n"})
    core_assign(repo, "t1", "a.txt")
    assert worker(repo, "start", "t1", "--session", SESS_A).code == 0
    r = worker(repo, "blocked", "t1", "--reason", "  ")
    assert r.code == 2
    assert inbox_files(repo) == []


# ---- every kind of change, as the report lists it ---------------------------------------

def test_modified_text_has_exact_hunk_ranges(make_repo) -> None:
    repo = started(make_repo, {"f.txt": numbered(10)}, "f.txt")
    set_line(repo, "f.txt", 3, "three")  # replace line 3
    lines = (repo / "f.txt").read_text().split("\n")
    lines[5:5] = ["new a", "new b"]  # insert two lines after old line 5
    del lines[9:11]  # delete old lines 8 and 9
    (repo / "f.txt").write_text("\n".join(lines))
    report = core_done(repo, "t1")
    entry = change(report, "f.txt")
    assert entry["kind"] == "modified"
    assert ranges(entry) == [(3, 1, 3, 1), (5, 0, 6, 2), (8, 2, 9, 0)]
    assert all(re.fullmatch(r"[0-9a-f]{64}", h["sha256"]) for h in entry["hunks"])
    assert len({h["sha256"] for h in entry["hunks"]}) == 3
    assert re.fullmatch(r"[0-9a-f]{64}", report["patch_sha256"])
    assert core_review(repo, "t1")["ok"] is True


def test_added_file_under_a_glob(make_repo) -> None:
    repo = started(make_repo, {"src/a.py": "a = 1\n"}, "src/**/*.py")
    write(repo, "src/pkg/new.py", "x = 1\ny = 2\n")
    report = core_done(repo, "t1")
    entry = change(report, "src/pkg/new.py")
    assert entry["kind"] == "added"
    assert entry["old_path"] is None
    assert entry["new_mode"] == "100644"
    assert ranges(entry) == [(0, 0, 1, 2)]
    assert [c["path"] for c in report["changes"]] == ["src/pkg/new.py"]
    assert core_review(repo, "t1")["ok"] is True


def test_deleted_file(make_repo) -> None:
    repo = started(make_repo, {"old.txt": numbered(3), "keep.txt": "k\n"}, "*.txt")
    os.remove(repo / "old.txt")
    report = core_done(repo, "t1")
    entry = change(report, "old.txt")
    assert entry["kind"] == "deleted"
    assert entry["new_mode"] is None
    assert [c["path"] for c in report["changes"]] == ["old.txt"]
    assert core_review(repo, "t1")["ok"] is True


def test_binary_change(make_repo) -> None:
    repo = started(make_repo, {"img.bin": b"\x89PNG\x00\x01\x02\x03" * 8}, "*.bin")
    write(repo, "img.bin", b"\x89PNG\x00\x09\x09\x09" * 8)
    report = core_done(repo, "t1")
    entry = change(report, "img.bin")
    assert entry["kind"] == "binary"
    assert entry["new_oid"] == git(repo, "hash-object", "img.bin").strip()
    assert core_review(repo, "t1")["ok"] is True


def test_chmod_plus_x_is_a_mode_change(make_repo) -> None:
    repo = started(make_repo, {"run.sh": "echo hi\n"}, "run.sh")
    os.chmod(repo / "run.sh", 0o755)
    report = core_done(repo, "t1")
    entry = change(report, "run.sh")
    assert entry["kind"] == "mode"
    assert (entry["old_mode"], entry["new_mode"]) == ("100644", "100755")
    assert entry["hunks"] == []
    assert core_review(repo, "t1")["ok"] is True


def test_symlink_added(make_repo) -> None:
    repo = started(make_repo, {"target.txt": "t\n"}, "links/*")
    (repo / "links").mkdir()
    os.symlink("../target.txt", repo / "links" / "to-target")
    report = core_done(repo, "t1")
    entry = change(report, "links/to-target")
    assert entry["kind"] == "added"
    assert entry["new_mode"] == "120000"
    blob = git(repo, "cat-file", "-p", f"{report['snapshot']}:links/to-target")
    assert blob == "../target.txt"
    assert core_review(repo, "t1")["ok"] is True


def test_file_without_trailing_newline_edited(make_repo) -> None:
    repo = started(make_repo, {"f.txt": "a\nb\nc"}, "f.txt")
    write(repo, "f.txt", "a\nb\nC")
    report = core_done(repo, "t1")
    entry = change(report, "f.txt")
    assert entry["kind"] == "modified"
    assert ranges(entry) == [(3, 1, 3, 1)]
    assert core_review(repo, "t1")["ok"] is True


def test_adding_only_a_final_newline_is_a_change_of_its_own(make_repo) -> None:
    # "c" -> "c\n" differs from "c" -> "C\n" and from "C" -> "C\n": the digest must see
    # the missing newline, or a stale report would pass for the real one.
    digests = []
    for before, after in (("a\nc", "a\nc\n"), ("a\nc", "a\nC\n"), ("a\nC", "a\nC\n")):
        repo = started(make_repo, {"f.txt": before}, "f.txt")
        write(repo, "f.txt", after)
        entry = change(core_done(repo, "t1"), "f.txt")
        assert ranges(entry) == [(2, 1, 2, 1)]
        digests.append(entry["hunks"][0]["sha256"])
    assert len(set(digests)) == 3


def test_crlf_file_edited(make_repo) -> None:
    repo = started(make_repo, {"win.txt": b"one\r\ntwo\r\nthree\r\n"}, "win.txt")
    write(repo, "win.txt", b"one\r\nTWO\r\nthree\r\nfour\r\n")
    report = core_done(repo, "t1")
    entry = change(report, "win.txt")
    assert entry["kind"] == "modified"
    assert ranges(entry) == [(2, 1, 2, 1), (3, 0, 4, 1)]
    assert core_review(repo, "t1")["ok"] is True


def test_crlf_only_line_ending_change_is_reported(make_repo) -> None:
    repo = started(make_repo, {"win.txt": b"one\r\ntwo\r\n"}, "win.txt")
    write(repo, "win.txt", b"one\r\ntwo\n")
    entry = change(core_done(repo, "t1"), "win.txt")
    assert entry["kind"] == "modified"
    assert ranges(entry) == [(2, 1, 2, 1)]


def test_latin1_content_edited(make_repo) -> None:
    repo = started(make_repo, {"legacy.txt": b"caf\xe9\nna\xefve\nfa\xe7ade\n"}, "legacy.txt")
    write(repo, "legacy.txt", b"caf\xe9\nNA\xcfVE\nfa\xe7ade\n")
    report = core_done(repo, "t1")
    entry = change(report, "legacy.txt")
    assert entry["kind"] == "modified"
    assert ranges(entry) == [(2, 1, 2, 1)]
    assert core_review(repo, "t1")["ok"] is True


@pytest.mark.parametrize("path", [
    "dir with space/file name.txt",
    'quotes/it\'s "quoted".txt',
    "unicode/ünïcödé 文件.txt",
])
def test_awkward_paths(make_repo, path: str) -> None:
    top = path.split("/")[0]
    repo = started(make_repo, {path: numbered(4)}, f"{top}/*")
    set_line(repo, path, 2, "changed")
    write(repo, f"{top}/new {path.split('/')[1]}", "fresh\n")
    report = core_done(repo, "t1")
    entry = change(report, path)
    assert entry["kind"] == "modified"
    assert ranges(entry) == [(2, 1, 2, 1)]
    assert change(report, f"{top}/new {path.split('/')[1]}")["kind"] == "added"
    assert core_review(repo, "t1")["ok"] is True


def test_plain_mv_inside_the_glob_is_a_rename(make_repo) -> None:
    repo = started(make_repo, {"docs/old name.md": numbered(5)}, "docs/*")
    os.rename(repo / "docs" / "old name.md", repo / "docs" / "new-name.md")
    report = core_done(repo, "t1")
    assert len(report["changes"]) == 1
    entry = report["changes"][0]
    assert entry["kind"] == "renamed"
    assert entry["path"] == "docs/new-name.md"
    assert entry["old_path"] == "docs/old name.md"
    assert core_review(repo, "t1")["ok"] is True


def test_several_kinds_in_one_report(make_repo, coord, worker) -> None:
    """Through the CLI, as a user would run it: every kind in one report."""
    repo = make_repo({"f.txt": numbered(5), "gone.txt": "g\n", "run.sh": "echo\n",
                      "blob.bin": b"\x00\x01\x02", "mv-me.txt": "m\n"})
    cli_assign(coord, repo, "t1", "*")
    assert worker(repo, "start", "t1", "--session", SESS_A).code == 0
    set_line(repo, "f.txt", 1, "first")
    os.remove(repo / "gone.txt")
    os.chmod(repo / "run.sh", 0o755)
    write(repo, "blob.bin", b"\x00\x01\x03")
    os.rename(repo / "mv-me.txt", repo / "moved.txt")
    write(repo, "brand-new.txt", "n\n")
    r = worker(repo, "done", "t1")
    report = delivered(r)
    kinds = {c["path"]: c["kind"] for c in report["changes"]}
    assert kinds == {"f.txt": "modified", "gone.txt": "deleted", "run.sh": "mode",
                     "blob.bin": "binary", "moved.txt": "renamed", "brand-new.txt": "added"}
    assert r.doc["report"]["changes"] == 6
    nxt = coord(repo, "next")
    assert nxt.code == 0
    assert nxt.doc["next"]["report"]["report_id"] == report["report_id"]
    assert nxt.doc["next"]["validation"]["ok"] is True
    assert nxt.doc["next"]["validation"]["findings"] == []


# ---- identity and ownership --------------------------------------------------------------

def test_hunk_digest_is_independent_of_position(make_repo) -> None:
    repo_a = started(make_repo, {"f.txt": numbered(10)}, "f.txt")
    repo_b = started(make_repo, {"f.txt": "pre\n" * 5 + numbered(10)}, "f.txt")
    set_line(repo_a, "f.txt", 3, "edited line")
    set_line(repo_b, "f.txt", 8, "edited line")  # the same "line 3", five lines lower
    set_line(repo_b, "f.txt", 2, "another edit")
    a = change(core_done(repo_a, "t1"), "f.txt")["hunks"]
    b = change(core_done(repo_b, "t1"), "f.txt")["hunks"]
    assert [(h["old_start"], h["old_lines"]) for h in a] == [(3, 1)]
    assert [(h["old_start"], h["old_lines"]) for h in b] == [(2, 1), (8, 1)]
    assert b[1]["sha256"] == a[0]["sha256"]
    assert b[0]["sha256"] != a[0]["sha256"]


def test_whole_report_digest_follows_the_files_content(make_repo) -> None:
    """A whole-file grant is identified by the content its commit gives: the same edit at
    another line is another change (a moved line must make a report stale)."""
    repo_a = started(make_repo, {"f.txt": numbered(10)}, "f.txt")
    repo_b = started(make_repo, {"f.txt": numbered(10)}, "f.txt")
    repo_c = started(make_repo, {"f.txt": numbered(10)}, "f.txt")
    set_line(repo_a, "f.txt", 3, "edited line")
    set_line(repo_b, "f.txt", 8, "edited line")
    set_line(repo_c, "f.txt", 3, "edited line")
    a, b, c = (core_done(r, "t1")["patch_sha256"] for r in (repo_a, repo_b, repo_c))
    assert a != b and a == c


def test_changes_outside_the_grants_are_overlaps_not_changes(make_repo, coord, worker) -> None:
    repo = make_repo({"src/a.py": numbered(3), "docs/readme.md": "read me\n", "b.txt": "b\n"})
    core_assign(repo, "t1", "src/*.py")
    core_assign(repo, "t2", "b.txt")
    assert worker(repo, "start", "t1", "--session", SESS_A).code == 0
    set_line(repo, "src/a.py", 2, "mine")
    write(repo, "docs/readme.md", "someone else\n")  # tracked, no grant
    write(repo, "stray.txt", "untracked, no grant\n")
    write(repo, "b.txt", "t2's edit\n")  # another task's file
    r = worker(repo, "done", "t1")
    report = delivered(r)
    assert [c["path"] for c in report["changes"]] == ["src/a.py"]
    overlap_paths = {o["path"] for o in report["overlaps"]}
    assert {"docs/readme.md", "stray.txt"} <= overlap_paths
    assert "src/a.py" not in overlap_paths
    assert "b.txt" not in {c["path"] for c in report["changes"]}
    assert all(o["note"] for o in report["overlaps"])
    assert coord(repo, "review", "t1").code == 0


def test_range_grant_reports_only_its_lines(make_repo) -> None:
    repo = make_repo({"f.txt": numbered(20)})
    core_assign(repo, "t1", "f.txt:1-10")
    core_assign(repo, "t2", "f.txt:11-20")
    core_start(repo, "t1")
    set_line(repo, "f.txt", 4, "t1 edit")
    set_line(repo, "f.txt", 15, "t2 edit")
    report = core_done(repo, "t1")
    assert ranges(change(report, "f.txt")) == [(4, 1, 4, 1)]
    assert report["overlaps"] == []


def test_change_straddling_grants_is_an_overlap(make_repo) -> None:
    repo = make_repo({"f.txt": numbered(20)})
    core_assign(repo, "t1", "f.txt:1-10")
    core_assign(repo, "t2", "f.txt:11-20")
    core_start(repo, "t1")
    text = (repo / "f.txt").read_text().replace("line 10\nline 11\n", "joined\n")
    (repo / "f.txt").write_text(text)
    # The worker's edit joined its last line with t2's first: whose the new line is, the
    # file cannot tell; nothing is delivered, and the message says which lines, with whom,
    # and what to do.
    from hunkwise.shared.errors import CheckFailed

    with pytest.raises(CheckFailed) as err:
        core_done(repo, "t1")
    assert "f.txt:10" in err.value.message and "t2" in err.value.message
    assert "--claim" in err.value.message


# ---- paths git allows but UTF-8 does not ---------------------------------------------------

def test_non_utf8_file_name_outside_the_grants_does_not_stop_worker_done(make_repo, worker) -> None:
    repo = make_repo({"a.txt": "a\n"})
    core_assign(repo, "t1", "a.txt")
    assert worker(repo, "start", "t1", "--session", SESS_A).code == 0
    write(repo, "a.txt", "A\n")
    (repo / os.fsdecode(b"caf\xe9.txt")).write_bytes(b"someone else's file\n")
    r = worker(repo, "done", "t1")
    report = delivered(r)  # exit 0: a stray file of someone else never blocks a worker
    assert [c["path"] for c in report["changes"]] == ["a.txt"]
    assert len(report["overlaps"]) == 1


def test_non_utf8_file_name_inside_the_grant_is_reported(make_repo, coord, worker) -> None:
    repo = make_repo({"a.txt": "a\n"})
    core_assign(repo, "t1", "*.txt")
    assert worker(repo, "start", "t1", "--session", SESS_A).code == 0
    (repo / os.fsdecode(b"caf\xe9.txt")).write_bytes(b"latin-1 named\n")
    report = delivered(worker(repo, "done", "t1"))
    assert [c["kind"] for c in report["changes"]] == ["added"]
    rv = coord(repo, "review", "t1")
    assert rv.code == 0, rv.stdout + rv.stderr
