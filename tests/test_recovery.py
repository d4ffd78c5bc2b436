"""Recovery of reported and unreported work; restore, discard and revert write safely.

The scene: t1 (f.txt:1-10) edited and reported; t2 (g.txt, new/**) edited and never
reported, its work recorded by a worker command. Destructive git commands run for real.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from testing.cli import Cli, assign_and_start, ok, run_cli
from testing.repo import git, numbered, set_line, write
from testing.wait import wait_until


def task(coord: Cli, worker: Cli, repo: Path, tid: str, *grants: str) -> None:
    args = ["assign", tid, "--title", f"title of {tid}", "--expect", "works"]
    for g in grants:
        args += ["--write", g]
    ok(coord(repo, *args))
    ok(worker(repo, "start", tid))


def snapshot(repo: Path, paths: tuple[str, ...]) -> dict[str, bytes | None]:
    return {p: (repo / p).read_bytes() if (repo / p).exists() else None for p in paths}


PATHS = ("f.txt", "g.txt", "new/n.txt")


def scene(make_repo: Callable[..., Path], coord: Cli, worker: Cli) -> tuple[Path, dict[str, Any]]:
    repo = make_repo({"f.txt": numbered(20), "g.txt": numbered(5, "g")})
    task(coord, worker, repo, "t1", "f.txt:1-10")
    task(coord, worker, repo, "t2", "g.txt", "new/**")
    set_line(repo, "f.txt", 3, "line three, by t1")
    ok(worker(repo, "done", "t1"))
    set_line(repo, "g.txt", 2, "g two, by t2")
    write(repo, "new/n.txt", "a new file of t2\n")
    hb = ok(worker(repo, "heartbeat", "t2"))
    assert "lost" not in hb
    return repo, snapshot(repo, PATHS)


def lost(coord: Cli, repo: Path) -> dict[str, list[str]]:
    return {d["task"]: d["paths"] for d in ok(coord(repo, "status"))["lost"]}


# ---- unreported work is recorded and recoverable ---------------------------------------------

def test_unreported_work_is_recorded_as_a_snapshot_ref_only_when_it_changed(
        make_repo, coord, worker) -> None:
    repo, _ = scene(make_repo, coord, worker)
    refs = git(repo, "for-each-ref", "--format=%(refname) %(objecttype)", "refs/hunkwise/wip/")
    assert re.fullmatch(r"refs/hunkwise/wip/t2/w1-\d+ tree", refs.split("\n")[0]), refs
    state = repo / ".git" / "coord" / "state.json"
    before = json.loads(state.read_bytes())["tasks"]["t2"]["saved"]
    ok(worker(repo, "heartbeat", "t2"))  # nothing changed: nothing recorded
    mtime = state.stat().st_mtime_ns
    ok(coord(repo, "status"))
    assert state.stat().st_mtime_ns == mtime  # status wrote nothing
    assert json.loads(state.read_bytes())["tasks"]["t2"]["saved"] == before
    set_line(repo, "g.txt", 4, "g four, by t2")
    ok(coord(repo, "status"))  # status records it too
    saved = json.loads(state.read_bytes())["tasks"]["t2"]["saved"]
    assert saved["kind"] == "wip" and saved["revision"] == 2
    # Beside its snapshot, the tree of the base and t2's changes alone (t1's are not).
    assert git(repo, "for-each-ref", "--format=%(refname) %(objectname)",
               "refs/hunkwise/wip/").split() == \
        [saved["ref"], saved["tree"], saved["ref"] + "-own", saved["own"]] \
        and re.fullmatch(r"refs/hunkwise/wip/t2/w2-\d+", saved["ref"])
    assert git(repo, "show", f"{saved['own']}:f.txt") == numbered(20)
    assert git(repo, "show", f"{saved['own']}:g.txt") == git(repo, "show", f"{saved['tree']}:g.txt")


def test_in_progress_work_destroyed_is_listed_kept_and_restored(make_repo, coord, worker) -> None:
    repo, want = scene(make_repo, coord, worker)
    git(repo, "checkout", "--", "g.txt")
    # A worker command after the accident must not bury the work under a new record.
    hb = ok(worker(repo, "heartbeat", "t2"))
    assert hb["lost"] == [{"task": "t2", "paths": ["g.txt"], "restore": "coord restore t2"}]
    assert lost(coord, repo) == {"t2": ["g.txt"]}
    sess = json.loads((repo / ".git" / "coord" / "state.json").read_bytes())["tasks"]["t2"]["session"]
    start = ok(worker(repo, "start", "t2", session=sess))
    assert start["lost"] == {"paths": ["g.txt"], "restore": "coord restore t2"}
    human = worker(repo, "start", "t2", session=sess, json_out=False)
    assert "gone" in human.stdout and "coord restore t2" in human.stdout
    doc = ok(coord(repo, "restore", "t2"))
    assert doc["restored"] == ["g.txt"] and doc["kind"] == "wip"
    assert snapshot(repo, PATHS) == want
    assert lost(coord, repo) == {}


DESTROYERS = [
    ("checkout-paths", "git checkout -- f.txt g.txt"),
    ("reset-hard", "git reset -q --hard"),
    ("stash", "git stash -q"),
    ("checkout-index", "git checkout-index -f -a"),
    ("read-tree", "git read-tree -u --reset HEAD"),
    ("diff-apply-R", "git diff | git apply -R"),
    ("clean-fd", "git clean -fdq"),
]


@pytest.mark.parametrize("command", [d[1] for d in DESTROYERS], ids=[d[0] for d in DESTROYERS])
def test_each_destructive_command_is_blocked_by_the_guard_and_undone_by_restore(
        make_repo, coord, worker, command: str) -> None:
    from hunkwise.coordinator.guard import guard

    repo, want = scene(make_repo, coord, worker)
    call = json.dumps({"tool_name": "Bash", "tool_input": {"command": command}})
    code, message = guard(call, env={"COORD_SESSION": "sess-20260101-0000-worker@m"})
    assert code == 2 and message, command
    head = git(repo, "rev-parse", "HEAD")
    subprocess.run(command, shell=True, cwd=repo, check=True, capture_output=True)
    assert snapshot(repo, PATHS) != want, "the command destroyed nothing: test is moot"
    gone = lost(coord, repo)
    assert gone, f"{command}: nothing listed as lost"
    ok(worker(repo, "heartbeat", "t2"))  # a worker command in between buries nothing
    for tid in sorted(gone):
        assert ok(coord(repo, "restore", tid))["restored"] == gone[tid]
    assert snapshot(repo, PATHS) == want
    assert lost(coord, repo) == {}
    assert git(repo, "rev-parse", "HEAD") == head
    ok(worker(repo, "done", "t2"))
    ok(coord(repo, "accept", "t1"))
    ok(coord(repo, "accept", "t2"))
    assert git(repo, "status", "--porcelain") == ""


# ---- restore trusts only the state, within grants, by place --------------------------------

def test_a_forged_newest_report_steers_neither_status_nor_restore(make_repo, coord, worker) -> None:
    from hunkwise import inbox

    repo = make_repo({"a.txt": numbered(5), "b.txt": numbered(5, "b")})
    task(coord, worker, repo, "A", "a.txt")
    task(coord, worker, repo, "B", "b.txt")
    set_line(repo, "a.txt", 1, "A's line")
    ok(worker(repo, "done", "A"))
    set_line(repo, "b.txt", 2, "B's uncommitted line")
    ok(worker(repo, "heartbeat", "B"))
    inbox_dir = repo / ".git" / "coord" / "inbox"
    real = json.loads(next((inbox_dir / "new").iterdir()).read_bytes())
    forged = dict(real, revision=2, report_id="forged",
                  changes=[dict(real["changes"][0], path="b.txt")])
    inbox.write_report(inbox_dir, json.dumps(forged).encode(), "A", 2)
    b_before = (repo / "b.txt").read_bytes()
    assert lost(coord, repo) == {}
    assert ok(coord(repo, "restore", "A"))["restored"] == []
    assert (repo / "b.txt").read_bytes() == b_before
    n = ok(coord(repo, "next"))
    assert n["next"]["report"]["revision"] == 1
    assert [p.name for p in (inbox_dir / "quarantine").iterdir() if p.suffix == ".reason"]


def test_a_rejected_task_is_never_restored_into_another_task_s_file(make_repo, coord,
                                                                     worker) -> None:
    repo = make_repo({"a.txt": numbered(5)})
    task(coord, worker, repo, "A", "a.txt")
    set_line(repo, "a.txt", 2, "rejected line")
    ok(worker(repo, "done", "A"))
    ok(coord(repo, "reject", "A", "--note", "no", "--discard"))
    assert (repo / "a.txt").read_text() == numbered(5)
    task(coord, worker, repo, "C", "a.txt")
    set_line(repo, "a.txt", 4, "C's line")
    r = coord(repo, "restore", "A")
    assert r.code == 3 and "rejected" in r.doc["error"]["message"]
    assert "rejected line" not in (repo / "a.txt").read_text()
    ok(worker(repo, "done", "C"))
    ok(coord(repo, "accept", "C"))
    assert "rejected line" not in git(repo, "show", "HEAD:a.txt")


PASS = "def f():\n    x = 1\n\n\ndef g():\n    y = 2\n\n\ndef h():\n    z = 3\n"


def test_identical_lines_of_two_tasks_are_told_apart_by_place(make_repo, coord, worker) -> None:
    repo = make_repo({"p.py": PASS})
    task(coord, worker, repo, "A", "p.py:1-4")
    task(coord, worker, repo, "B", "p.py:5-10")
    p = repo / "p.py"
    p.write_text(PASS.replace("    x = 1\n", "    x = 1\n    pass\n")
                 .replace("    y = 2\n", "    y = 2\n    pass\n"))
    # (a line appended to f's body, right above the blank lines between f and g: which of
    # them are A's the file alone cannot tell; A says they are its own, left as they were)
    ok(worker(repo, "done", "A", "--claim", "p.py"))
    ok(worker(repo, "heartbeat", "B"))
    p.write_text(PASS.replace("    x = 1\n", "    x = 1\n    pass\n"))  # B removes its own
    assert "A" not in lost(coord, repo)
    assert ok(coord(repo, "restore", "A"))["restored"] == []
    assert p.read_text() == PASS.replace("    x = 1\n", "    x = 1\n    pass\n")


def test_a_duplicated_line_lost_once_is_lost_and_comes_back(make_repo, coord, worker) -> None:
    text = "a\nb\nc\nd\ne\n"
    repo = make_repo({"d.txt": text})
    task(coord, worker, repo, "A", "d.txt")
    both = "a\npass\nb\nc\nd\npass\ne\n"
    (repo / "d.txt").write_text(both)
    ok(worker(repo, "done", "A"))
    (repo / "d.txt").write_text("a\npass\nb\nc\nd\ne\n")  # the second one destroyed
    assert lost(coord, repo) == {"A": ["d.txt"]}
    assert ok(coord(repo, "restore", "A"))["restored"] == ["d.txt"]
    assert (repo / "d.txt").read_text() == both


def test_a_forged_high_revision_failed_report_does_not_block_the_task(make_repo, coord,
                                                                      worker) -> None:
    from hunkwise import inbox

    repo = make_repo({"a.txt": numbered(5)})
    task(coord, worker, repo, "A", "a.txt")
    set_line(repo, "a.txt", 2, "A's line")
    ok(worker(repo, "done", "A"))
    inbox_dir = repo / ".git" / "coord" / "inbox"
    real = json.loads(next((inbox_dir / "new").iterdir()).read_bytes())
    inbox.write_report(inbox_dir, json.dumps(dict(real, revision=99, status="failed",
                                             reason="forged", report_id="x")).encode(), "A", 99)
    n = ok(coord(repo, "next"))
    assert n["next"]["report"]["revision"] == 1 and n["next"]["report"]["status"] == "done"
    ok(coord(repo, "request-changes", "A", "--note", "more"))
    ok(worker(repo, "start", "A"))
    set_line(repo, "a.txt", 3, "A's second line")
    ok(worker(repo, "done", "A"))
    n = ok(coord(repo, "next"))
    assert n["next"]["report"]["revision"] == 2 and n["next"]["validation"]["ok"]
    ok(coord(repo, "accept", "A"))


ODD = (os.fsdecode(b"odd-\xff.txt"), "new\nline.txt")


def test_restore_discard_and_revert_with_non_utf8_and_newline_paths(make_repo, coord,
                                                                    worker) -> None:
    repo = make_repo({ODD[0]: numbered(5), ODD[1]: numbered(5), "keep.txt": "k\n"})
    task(coord, worker, repo, "A", "odd-*", "new*")
    for p in ODD:
        set_line(repo, p, 2, "edited by A")
    want = snapshot(repo, ODD)
    ok(worker(repo, "done", "A"))
    git(repo, "checkout", "--", ".")
    assert snapshot(repo, ODD) != want
    assert len(ok(coord(repo, "restore", "A"))["restored"]) == 2
    assert snapshot(repo, ODD) == want
    ok(coord(repo, "reject", "A", "--note", "no", "--discard"))
    assert snapshot(repo, ODD) == {p: numbered(5).encode() for p in ODD}
    task(coord, worker, repo, "B", "odd-*", "new*")
    for p in ODD:
        set_line(repo, p, 4, "edited by B")
    ok(worker(repo, "done", "B"))
    ok(coord(repo, "accept", "B"))
    for p in ODD:
        set_line(repo, p, 1, "uncommitted, by someone")
    doc = ok(coord(repo, "revert", "B"))
    assert doc["tree_left"] == []
    for p in ODD:
        assert (repo / p).read_text() == numbered(5).replace("line 1", "uncommitted, by someone")
    assert git(repo, "diff", "--cached", "--name-only") == ""


# ---- compare-and-swap writes ----------------------------------------------------------------

def test_write_entries_writes_nothing_when_a_file_moved_under_it(make_repo) -> None:
    from hunkwise.shared.errors import StateRefused
    from hunkwise.shared.git import objects
    from hunkwise.shared.git.worktree import current_oids, write_entries

    repo = make_repo({"a.txt": "a\n", "b.txt": "b\n"})
    oids = current_oids(repo, ["a.txt", "b.txt"])
    new = objects.hash_blobs(repo, [b"A\n"])[0]
    (repo / "b.txt").write_text("b, changed meanwhile\n")
    with pytest.raises(StateRefused, match="changed while this ran.*retry") as e:
        write_entries(repo, {"a.txt": ("100644", new), "b.txt": None}, expect=oids)
    assert e.value.exit_code == 3
    assert (repo / "a.txt").read_text() == "a\n"
    assert (repo / "b.txt").read_text() == "b, changed meanwhile\n"
    assert sorted(p.name for p in repo.iterdir() if p.name != ".git") == ["a.txt", "b.txt"]


APPENDER = textwrap.dedent("""
    import os, random, sys, time
    path, stop, ready = sys.argv[1], sys.argv[2], sys.argv[3]
    random.seed(7)
    n = 0
    deadline = time.monotonic() + 120  # bounded: stops by itself
    open(ready, "w").close()
    while not os.path.exists(stop) and time.monotonic() < deadline:
        for _ in range(random.randint(1, 8)):  # a burst, a few ms apart
            # One O_APPEND write, as a logger does: the file is open for one system call.
            fd = os.open(path, os.O_WRONLY | os.O_APPEND)
            os.write(fd, f"appended {n}\\n".encode())
            os.close(fd)
            n += 1
            time.sleep(0.003)
        time.sleep(random.choice((0.003, 0.01, 0.05, 0.1)))
    print(n)
""")


@pytest.mark.slow
@pytest.mark.parametrize("part", range(5))
def test_discard_and_restore_race_an_appending_writer_and_lose_no_line(
        make_repo, coord, worker, tmp_path, part: int) -> None:
    """30 rounds in 5 parts of 6 (so the suite spreads them over its workers): A's line 2
    is recorded, destroyed, restored (retrying while the file moves), discarded; meanwhile
    another process appends to the same file every few ms."""
    from hunkwise.coordinator import outcomes, restore
    from hunkwise.shared.errors import StateRefused
    from hunkwise.shared.state.context import open_repo

    repo = make_repo({"f.txt": numbered(5)})
    ok(coord(repo, "assign", "B", "--title", "appender", "--expect", "e", "--write", "f.txt:5-5"))
    ok(worker(repo, "start", "B"))
    ctx = open_repo(str(repo))
    stop, ready = tmp_path / "stop", tmp_path / "ready"
    proc = subprocess.Popen([sys.executable, "-c", APPENDER, str(repo / "f.txt"), str(stop),
                             str(ready)], stdout=subprocess.PIPE, text=True)
    refused = 0

    def retry(fn: Callable[[], Any]) -> Any:
        nonlocal refused
        for _ in range(400):
            try:
                return fn()
            except StateRefused as e:
                assert "retry" in e.message or "changed" in e.message, e.message
                refused += 1
        raise AssertionError("never got through")

    def edit_line_2(text: str) -> None:
        """Change line 2 with a compare-and-swap write, as an editor that checks would."""
        from hunkwise.shared.git import objects
        from hunkwise.shared.git.worktree import current_oids, write_entries

        def once() -> None:
            before = (repo / "f.txt").read_bytes()
            rows = before.split(b"\n")
            rows[1] = text.encode()
            oid = objects.hash_blobs(repo, [b"\n".join(rows)])[0]
            expect = current_oids(repo, ["f.txt"])
            if objects.hash_blobs(repo, [before])[0] != expect["f.txt"]:
                raise StateRefused("changed while this ran, retry")
            write_entries(repo, {"f.txt": ("100644", oid)}, expect=expect)
        retry(once)

    def cli(tool: Cli, *args: str) -> Any:
        """A command that reads the whole tree may find it changing (exit 3): retry."""
        nonlocal refused
        for _ in range(400):
            r = tool(repo, *args)
            if r.code != 3:
                return ok(r)
            refused += 1
        raise AssertionError(f"{args} never got through")

    try:
        wait_until(ready.exists, what="the appender")
        for i in range(part * 6, part * 6 + 6):
            tid = f"A{i}"
            ok(coord(repo, "assign", tid, "--title", "t", "--expect", "e", "--write", "f.txt:1-3"))
            cli(worker, "start", tid)
            edit_line_2(f"line 2 by {tid}")
            wait_until(lambda tid=tid: cli(worker, "heartbeat", tid) and _saved(repo, tid),
                       what="a record of the edit")
            edit_line_2("line 2")  # destroyed
            retry(lambda tid=tid: restore.restore(ctx, tid))
            assert (repo / "f.txt").read_text().split("\n")[1] == f"line 2 by {tid}"
            retry(lambda tid=tid: outcomes.reject(ctx, tid, "round over", True))
            assert (repo / "f.txt").read_text().split("\n")[1] == "line 2"
    finally:
        stop.touch()
        out, _ = proc.communicate(timeout=60)
    n = int(out)
    lines = (repo / "f.txt").read_text().split("\n")
    appended = [x for x in lines if x.startswith("appended ")]
    assert appended == [f"appended {k}" for k in range(n)], "a line was lost or reordered"
    assert n > 20
    print(f"{n} lines appended, {refused} writes refused and retried")


def _saved(repo: Path, tid: str) -> bool:
    state = json.loads((repo / ".git" / "coord" / "state.json").read_bytes())
    saved = state["tasks"][tid].get("saved")
    return bool(saved and saved["hunks"].get("f.txt"))


# ---- coord next serves a report once ------------------------------------------------------

@pytest.mark.slow
def test_two_concurrent_next_never_serve_one_report_twice(make_repo, coord, worker) -> None:
    repo = make_repo({f"{i}.txt": numbered(3) for i in range(6)})
    for i in range(6):
        task(coord, worker, repo, f"T{i}", f"{i}.txt")
        set_line(repo, f"{i}.txt", 1, f"by T{i}")
        ok(worker(repo, "done", f"T{i}"))
    import concurrent.futures as cf

    with cf.ThreadPoolExecutor(2) as pool:
        def drain() -> list[str]:
            got = []
            while True:
                r = run_cli("coord", repo, "next", process=True)
                doc = ok(r)
                if doc["next"] is None:
                    return got
                got.append(doc["next"]["report"]["task_id"])
        a, b = pool.submit(drain), pool.submit(drain)
        served = a.result() + b.result()
    assert sorted(served) == [f"T{i}" for i in range(6)]


def test_a_crash_after_delivery_never_gives_two_reports_one_revision(make_repo, coord,
                                                                      worker) -> None:
    repo = make_repo({"a.txt": numbered(5)})
    task(coord, worker, repo, "A", "a.txt")
    set_line(repo, "a.txt", 1, "first")
    r = run_cli("worker", repo, "done", "A", process=True,
                env={"HUNKWISE_TEST_KILL_AT": "worker-delivered"})
    assert r.code == -9
    set_line(repo, "a.txt", 1, "second")
    ok(worker(repo, "done", "A"))
    names = sorted(p.name.rsplit("rev=", 1)[1]
                   for p in (repo / ".git" / "coord" / "inbox" / "new").iterdir())
    assert names == ["1", "2"]
    n = ok(coord(repo, "next"))
    assert n["next"]["report"]["revision"] == 2 and n["next"]["validation"]["ok"]


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="names fsynced files by /proc")
def test_recording_unreported_work_holds_the_state_lock_for_the_state_alone(
        make_repo, coord, worker, under_lock: list[str]) -> None:
    """`worker heartbeat` and `coord status` record a task's changed work: its ref is
    written before the lock and the older one dropped after it."""
    repo, _ = scene(make_repo, coord, worker)
    for n, (tool, args) in enumerate(((worker, ("heartbeat", "t2")), (coord, ("status",)))):
        set_line(repo, "g.txt", 4, f"g four, take {n}")
        under_lock.clear()
        ok(tool(repo, *args))
        assert under_lock.count("hold") >= 1
        assert [s for s in under_lock if s != "hold"] == []
    saved = json.loads((repo / ".git" / "coord" / "state.json").read_bytes())["tasks"]["t2"]["saved"]
    assert git(repo, "for-each-ref", "--format=%(refname) %(objectname)", "refs/hunkwise/wip/") \
        .split() == [saved["ref"], saved["tree"], saved["ref"] + "-own", saved["own"]]


def test_restore_around_an_insertion_after_the_deleted_line(make_repo, coord, worker) -> None:
    repo = make_repo({"f.txt": numbered(10)})
    f = repo / "f.txt"
    assign_and_start(coord, worker, repo, "A", "f.txt:6-6",
          lambda: f.write_text(f.read_text().replace("line 6\n", "")))
    assert worker(repo, "done", "A").code == 0
    git(repo, "checkout", "-q", "f.txt")  # destroys A's change
    f.write_text(f.read_text().replace("line 6\n", "line 6\nX\nY\n"))  # someone inserts after 6
    r = coord(repo, "restore", "A")
    assert r.code == 0, r.stdout + r.stderr
    assert f.read_text() == numbered(10).replace("line 6\n", "X\nY\n")


# ---- a record holds exactly the task's changes, however attribution cut them -------------

# (base, grant, the task's edit): attribution by region cuts these edits otherwise than
# git's own -U0 diff of base -> tree prints them, so a record that kept git's hunks by the
# places attribution gave them kept none of them.
CUT_OTHERWISE = {
    "comment-above-the-range": ("x\ndef f():\n    return 1\n", "m.py:2-3",
                                "x\n# c\ndef f():\n    return 1\n"),
    "change-and-dropped-blank": ("a\nb\n\n\nc\n", "m.py:1-4", "a\nB\n\nc\n"),
}


@pytest.mark.parametrize("recorded_by", ["done", "heartbeat"])
@pytest.mark.parametrize("case", sorted(CUT_OTHERWISE))
def test_a_change_attribution_cuts_otherwise_than_git_is_listed_lost_and_restored(
        make_repo, coord, worker, case: str, recorded_by: str) -> None:
    base, grant, edited = CUT_OTHERWISE[case]
    repo = make_repo({"m.py": base})
    task(coord, worker, repo, "T1", grant)
    (repo / "m.py").write_text(edited)
    ok(worker(repo, recorded_by, "T1"))
    git(repo, "checkout", "--", "m.py")
    assert lost(coord, repo) == {"T1": ["m.py"]}
    assert ok(coord(repo, "restore", "T1"))["restored"] == ["m.py"]
    assert (repo / "m.py").read_text() == edited
    assert lost(coord, repo) == {}
    assert ok(coord(repo, "restore", "T1"))["restored"] == []  # nothing twice
    assert (repo / "m.py").read_text() == edited


F3_F4 = ("def f3(a, b):\n    x = a + 3\n    return x\n"
         "\n\ndef f4(a, b):\n    x = a + 4\n    return x\n")


def test_work_recorded_before_a_neighbours_edit_restores_exactly(make_repo, coord, worker) -> None:
    """Was: T3 (its function alone) appended a blank line and its work was recorded while
    the file held only that; T4 (the two blank lines and its function) then deleted its
    function, keeping the blank lines, and reported. The early record held three blank
    lines added (the boundary's contest, taken by T3's own view, on top of T4's two), so
    `coord status` listed T3's work as lost on the tree holding it, and after `git
    checkout` restoring every task left a blank line too many. The file then read as the
    base with T3's range alone changed: the record takes it so."""
    from hunkwise.shared.state import provenance

    repo = make_repo({"m.py": F3_F4})
    for tid, grant in (("T3", "m.py:1-3"), ("T4", "m.py:4-8")):
        ok(coord(repo, "assign", tid, "--title", tid, "--expect", "e", "--write", grant))
        ok(worker(repo, "start", tid, "--session", f"sess-20260101-0900-{tid.lower()}@m"))
    (repo / "m.py").write_text(F3_F4.replace("return x\n\n\n", "return x\n\n\n\n", 1))
    ok(worker(repo, "heartbeat", "T3"))
    final = "def f3(a, b):\n    x = a + 3\n    return x\n\n\n\n"
    (repo / "m.py").write_text(final)
    # What the agent hooks record of each session's edits.
    root = provenance.root_of(repo)
    provenance.note(root, "sess-20260101-0900-t3@m", "m.py", [b"\n"], removed=[])
    provenance.note(root, "sess-20260101-0900-t4@m", "m.py", [],
                    removed=[b"def f4(a, b):\n", b"    x = a + 4\n", b"    return x\n"])
    ok(worker(repo, "done", "T4"))
    assert ok(coord(repo, "status"))["lost"] == []
    git(repo, "checkout", "--", "m.py")
    for tid in ("T3", "T4"):
        ok(coord(repo, "restore", tid))
    assert (repo / "m.py").read_text() == final


def test_a_record_taking_its_file_whole_never_takes_a_neighbours_noted_line(
        make_repo, coord, worker) -> None:
    """T3 (two blank lines and f3) adds a blank line at its top, contested with T2 (nothing
    noted who wrote it); T4 writes a comment right below T3's last line, which the hooks
    note as T4's. T3's record must not take the file whole (the comment would be in it):
    when T4 takes the comment out again, nothing is lost, and a restore of every task
    after a checkout never brings the comment back."""
    from hunkwise.shared.state import provenance, store
    from hunkwise.shared.state.context import open_repo

    f2 = "def f2(a, b):\n    x = a + 2\n    return x\n"
    f3 = "\n\ndef f3(a, b):\n    x = a + 3\n    return x\n"
    f4 = "\n\ndef f4(a, b):\n    x = a + 4\n    return x\n"
    repo = make_repo({"m.py": f2 + f3 + f4})
    for tid, grant in (("T2", "m.py:1-3"), ("T3", "m.py:4-8"), ("T4", "m.py:9-13")):
        ok(coord(repo, "assign", tid, "--title", tid, "--expect", "e", "--write", grant))
        ok(worker(repo, "start", tid, "--session", f"sess-20260101-0900-{tid.lower()}@m"))
    root = provenance.root_of(repo)
    (repo / "m.py").write_text(f2 + "\n" + f3 + "# t4 note\n" + f4)
    provenance.note(root, "sess-20260101-0900-t4@m", "m.py", [b"# t4 note\n"], removed=[])
    ok(worker(repo, "heartbeat", "T3"))
    own = store.load(open_repo(str(repo)).lay).tasks["T3"].saved.own
    assert "# t4 note" not in git(repo, "show", f"{own}:m.py")
    now = f2 + "\n" + f3 + f4
    (repo / "m.py").write_text(now)
    provenance.note(root, "sess-20260101-0900-t4@m", "m.py", [], removed=[b"# t4 note\n"])
    assert ok(coord(repo, "status"))["lost"] == []
    git(repo, "checkout", "--", "m.py")
    for tid in ("T4", "T3", "T2"):
        coord(repo, "restore", tid)
    assert (repo / "m.py").read_text() == now


@pytest.mark.parametrize("case", ["the neighbour deletes its blank lines too",
                                  "no final newline"])
def test_an_early_record_and_the_neighbours_deletion_restore_exactly(
        make_repo, coord, worker, case: str) -> None:
    """T3 appends a blank line and records; T4 then deletes its function (with its blank
    lines, or, in a file without a final newline, keeping them) and records what its edit
    removed. Nothing is lost, and a restore of both after a checkout gives the file back."""
    from hunkwise.shared.state import provenance

    f3, fn = "def f3(a, b):\n    x = a + 3\n    return x\n", "def f4(a, b):\n    x = a + 4\n    return x\n"
    cut = (lambda t: t[:-1]) if case == "no final newline" else (lambda t: t)
    repo = make_repo({"m.py": cut(f3 + "\n\n" + fn)})
    for tid, grant in (("T3", "m.py:1-3"), ("T4", "m.py:4-8")):
        ok(coord(repo, "assign", tid, "--title", tid, "--expect", "e", "--write", grant))
        ok(worker(repo, "start", tid, "--session", f"sess-20260101-0900-{tid.lower()}@m"))
    (repo / "m.py").write_text(cut(f3 + "\n\n\n" + fn))
    ok(worker(repo, "heartbeat", "T3"))
    # (Without a final newline, deleting the function's lines leaves the blank lines
    # before it whole.)
    final = f3 + "\n" if case != "no final newline" else f3 + "\n\n\n"
    (repo / "m.py").write_text(final)
    # What T4's edit removed, as the hooks record it: its function's lines as the file
    # held them (the last without a line ending where the file had none), and its blank
    # lines where it deleted them too.
    gone = [x.encode() + b"\n" for x in fn.split("\n")[:-1]]
    if case == "no final newline":
        gone[-1] = gone[-1][:-1]
    else:
        gone += [b"\n", b"\n"]
    provenance.note(provenance.root_of(repo), "sess-20260101-0900-t4@m", "m.py", [],
                    removed=gone)
    ok(worker(repo, "heartbeat", "T4"))
    assert ok(coord(repo, "status"))["lost"] == []
    git(repo, "checkout", "--", "m.py")
    for tid in ("T3", "T4"):
        coord(repo, "restore", tid)
    assert (repo / "m.py").read_text() == final


@pytest.mark.parametrize("edit", ["T4 deletes its function", "T4 edits its body"])
@pytest.mark.parametrize("order", [("T3", "T4"), ("T4", "T3")])
def test_a_contested_blank_line_another_record_holds_is_left_out_of_the_next(
        make_repo, coord, worker, edit: str, order: tuple[str, str]) -> None:
    """Without provenance: T3 appends a blank line to its function and records (its own
    view takes the contested blank run); T4 then edits and records, its own view taking the
    same contested line. The second record leaves out what T3's current record holds: a
    restore of both after a checkout gives the file back (it put the line back twice)."""
    f3, fn = "def f3(a, b):\n    x = a + 3\n    return x\n", "def f4(a, b):\n    x = a + 4\n    return x\n"
    repo = make_repo({"m.py": f3 + "\n\n" + fn})
    for tid, grant in (("T3", "m.py:1-3"), ("T4", "m.py:4-8")):
        ok(coord(repo, "assign", tid, "--title", tid, "--expect", "e", "--write", grant))
        ok(worker(repo, "start", tid, "--session", f"sess-20260101-0900-{tid.lower()}@m"))
    (repo / "m.py").write_text(f3 + "\n\n\n" + fn)
    ok(worker(repo, "heartbeat", "T3"))
    final = (f3 + "\n\n\n" if edit == "T4 deletes its function"
             else f3 + "\n\n\n" + fn.replace("a + 4", "a * 4"))
    (repo / "m.py").write_text(final)
    ok(worker(repo, "heartbeat", "T4"))
    assert ok(coord(repo, "status"))["lost"] == []
    git(repo, "checkout", "--", "m.py")
    for tid in order:
        ok(coord(repo, "restore", tid))
    assert (repo / "m.py").read_text() == final
