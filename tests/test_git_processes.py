"""The git processes a command starts, counted as bench/startup.py counts them: each command
runs as a real process under GIT_TRACE2_PERF, and every git it starts itself is listed.

A process whose answer is known is not started (shared/STYLE.md, "Processes"); these tests
hold the counts of the hot commands where the code has them, and check that what replaced
a process gives the same answer.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hunkwise.shared import git as hgit
from hunkwise.shared.git import objects
from hunkwise.shared.hunks import diff, snapshot

from testing.cli import Cli, ok
from testing.machines import REVIEWER, built_task, desktop_and_laptop
from testing.repo import MakeRepo, git, numbered, set_line, write
from testing.trace import named, traced


def two_tasks(make_repo: MakeRepo, coord: Cli, worker: Cli) -> Path:
    repo = make_repo({"a.txt": numbered(9), "b.txt": numbered(9)})
    for tid, path in (("A", "a.txt"), ("B", "b.txt")):
        ok(coord(repo, "assign", tid, "--title", tid, "--expect", "e", "--write", path))
        ok(worker(repo, "start", tid))
    return repo


# ---- the snapshot's diff ------------------------------------------------------------------

def test_the_snapshot_diff_and_its_patch_are_one_git_process(make_repo: MakeRepo, coord: Cli,
                                                             worker: Cli, tmp_path: Path) -> None:
    repo = two_tasks(make_repo, coord, worker)
    set_line(repo, "a.txt", 2, "A's line")
    set_line(repo, "b.txt", 5, "B's line")
    run = traced(tmp_path)
    for tool, args in (("coord", ("status",)), ("worker", ("done", "A"))):
        diffs = named(run(tool, repo, *args), "diff-tree")
        assert len(diffs) == 1 and " --raw -p " in diffs[0], diffs


def test_a_clean_tree_is_not_diffed(make_repo: MakeRepo, coord: Cli, worker: Cli,
                                    tmp_path: Path) -> None:
    repo = two_tasks(make_repo, coord, worker)
    assert named(traced(tmp_path)("coord", repo, "status"), "diff-tree") == []


def test_the_patch_read_with_the_raw_diff_is_the_patch_read_alone(make_repo: MakeRepo) -> None:
    """Odd names, binary content, modes, symlinks, deletions, additions, a type change: the
    hunks parsed from `diff-tree --raw -p` are those of a diff-tree that prints only them."""
    odd = ["plain.txt", "tab\there", "new\nline", 'quo"te', "back\\slash", "sp ace ", "é.txt",
           "sub/dir/x.txt", ":colon"]
    files: dict[str, str | bytes] = {n: "a\nb\nc\n" for n in odd}
    files.update({"mode.sh": "x\n", "gone.txt": "g\n", "type": "t\n", "bin.dat": b"\0\1\2"})
    repo = make_repo(files)
    os.symlink("plain.txt", repo / "link")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "more")
    for n in odd:
        write(repo, n, "a\nB\nc\nd")
    write(repo, os.fsdecode(b"\xff\xfe.bin"), b"y\n")
    (repo / "mode.sh").chmod(0o755)
    (repo / "gone.txt").unlink()
    (repo / "link").unlink()
    os.symlink("elsewhere", repo / "link")
    (repo / "type").unlink()
    os.symlink("plain.txt", repo / "type")
    write(repo, "bin.dat", b"\0\1\3")
    write(repo, "added.txt", "new\n")

    snap = snapshot.take(repo, patch=True)  # reads the raw diff and the patch together
    together = diff.diff_trees(repo, snap.head_tree, snap.tree)
    some = diff.diff_trees(repo, snap.head_tree, snap.tree, ["sub", "tab\there"])
    diff._RAW_DIFFS.clear()
    diff._PATCHES.clear()
    alone = diff.diff_trees(repo, snap.head_tree, snap.tree)
    assert together == alone
    assert len(alone) == len(odd) + 7 and sum(len(c.hunks) for c in alone) > len(odd)
    assert some == [c for c in alone if c.path in ("sub/dir/x.txt", "tab\there")]
    hgit.close_readers()


# ---- the snapshot's re-read ------------------------------------------------------------

def test_the_reread_hashes_plain_files_without_git(make_repo: MakeRepo, coord: Cli, worker: Cli,
                                                   tmp_path: Path) -> None:
    repo = two_tasks(make_repo, coord, worker)
    set_line(repo, "a.txt", 2, "A's line")
    write(repo, "new.txt", "a new file\n")
    assert named(traced(tmp_path)("coord", repo, "status"), "hash-object") == []


def test_a_file_git_converts_on_the_way_in_is_reread_through_git(make_repo: MakeRepo, coord: Cli,
                                                                 worker: Cli,
                                                                 tmp_path: Path) -> None:
    """Its bytes on disk (CRLF) are not its blob's (LF): only git can say what `add` made
    of them, so the re-read asks git for that file alone."""
    repo = make_repo({".gitattributes": "*.crlf text eol=crlf\n", "a.txt": "a\n", "w.crlf": "x\n"})
    ok(coord(repo, "assign", "A", "--title", "A", "--expect", "e", "--write", "*.crlf"))
    ok(worker(repo, "start", "A"))
    write(repo, "w.crlf", b"y\r\nz\r\n")
    write(repo, "a.txt", "b\n")
    started = traced(tmp_path)("worker", repo, "done", "A")
    assert len(named(started, "hash-object")) == 1
    snap = snapshot.take(repo)
    assert git(repo, "cat-file", "blob", f"{snap.tree}:w.crlf") == "y\nz\n"
    assert git(repo, "cat-file", "blob", f"{snap.tree}:a.txt") == "b\n"
    hgit.close_readers()


# ---- coord accept --------------------------------------------------------------------------

ACCEPT_MOST = 12  # bench/startup.py's target


@pytest.mark.parametrize("scene", ["alone", "beside", "ranges"])
def test_coord_accept_starts_at_most_12_git_processes(make_repo: MakeRepo, coord: Cli,
                                                      worker: Cli, tmp_path: Path,
                                                      scene: str) -> None:
    """The task's change alone in the tree; beside another task's edit (the tree committed is
    not the snapshot's); two range grants in one file, the other task's range moving down."""
    repo = make_repo({"a.txt": numbered(30), "b.txt": numbered(9)})
    grants = {"A": "a.txt:1-10", "B": "a.txt:20-30"} if scene == "ranges" else \
        {"A": "a.txt", "B": "b.txt"}
    for tid, grant in grants.items():
        ok(coord(repo, "assign", tid, "--title", tid, "--expect", "e", "--write", grant))
        ok(worker(repo, "start", tid))
    set_line(repo, "a.txt", 5, "A's line\nand one more")
    if scene == "ranges":
        set_line(repo, "a.txt", 25, "B's line")
    elif scene == "beside":
        set_line(repo, "b.txt", 5, "B's line")
    ok(worker(repo, "done", "A"))
    started = traced(tmp_path)("coord", repo, "accept", "A")
    assert len(started) <= ACCEPT_MOST, "\n".join(started)
    assert git(repo, "show", "HEAD:a.txt") == numbered(30).replace("line 5\n",
                                                                    "A's line\nand one more\n")
    tasks = {t["id"]: t for t in ok(coord(repo, "status"))["tasks"]}
    assert tasks["A"]["state"] == "accepted"
    assert tasks["B"]["grants"] == (["a.txt:21-31"] if scene == "ranges" else ["b.txt"])


# ---- records between machines ----------------------------------------------------------

def test_records_trees_are_the_trees_git_writes(make_repo: MakeRepo) -> None:
    """Tree ids computed here (a sync that changes nothing compares them and writes nothing)
    are those `mktree` writes, nested levels and empty subtrees kept; a tree read through
    the command's reader is what `ls-tree` lists."""
    from hunkwise.shared.machines import chains

    for fmt in ("sha1", "sha256"):
        repo = make_repo(commit=False)
        if fmt == "sha256":
            repo = repo.parent / "sha256"
            git(repo.parent, "init", "-q", "--object-format=sha256", str(repo))
        blob = objects.hash_blobs(repo, [b"{}\n"])[0]
        empty = git(repo, "mktree", input=b"").strip()
        assert objects.blob_id(repo, b"{}\n") == blob
        nested: chains.Nested = {
            "report.json": ("100644", blob), "run.sh": ("100755", blob),
            "base": ("040000", empty), "snapshot": ("040000", empty),
            "a": {"a-b": ("100644", blob), "a": {"x": ("100644", blob)}},  # "a" vs "a-b" order
            "a.txt": ("100644", blob),
        }
        planned, levels = chains.plan_tree(repo, nested)
        assert chains.mktree(repo, nested) == planned
        listed = git(repo, "ls-tree", planned)
        assert f"040000 tree {empty}\tbase" in listed and "100755 blob" in listed
        lines = [line.split("\t") for line in listed.splitlines()]
        assert chains.ls_tree(repo, planned) == {n: (m.split()[0], m.split()[2]) for m, n in lines}
        inner = chains.ls_tree(repo, f"{planned}:a")
        assert set(inner) == {"a-b", "a"} and inner["a"][0] == "040000"
        assert chains.ls_tree(repo, f"{planned}:report.json") == {}  # a blob, not a tree
        assert chains.ls_tree(repo, "no-such-rev") == {}
        assert len(levels) == 3
        hgit.close_readers()


def test_a_sync_that_changes_nothing_writes_nothing_and_pushes_nothing(
        tmp_path: Path, make_repo: MakeRepo, coord: Cli, worker: Cli,
        monkeypatch: pytest.MonkeyPatch) -> None:
    m = desktop_and_laptop(tmp_path, make_repo, coord, worker)
    built_task(m)
    ok(m.coord("desktop", "sync"))
    run = traced(tmp_path)
    monkeypatch.setenv("HUNKWISE_MACHINE", "desktop")
    again = run("coord", m.repos["desktop"], "sync")
    writes = [s for s in again if s.split(" ")[0] in
              ("fast-import", "hash-object", "mktree", "commit-tree", "update-ref", "push")]
    assert writes == [], again
    assert len(again) <= 3, again  # the fetch, one ref listing and the one reader


def test_a_verdict_is_fetched_for_once_and_pushed_once(
        tmp_path: Path, make_repo: MakeRepo, coord: Cli, worker: Cli,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`worker review --verdict` syncs when it begins (to see the request) and sends the
    verdict when it ends, without a second fetch."""
    m = desktop_and_laptop(tmp_path, make_repo, coord, worker)
    built_task(m)
    ok(m.coord("desktop", "audit", "task-001", "--roles", "review"))
    ok(m.coord("desktop", "next"))
    ok(m.worker("laptop", "start", "--role", "review", "--session", REVIEWER))
    monkeypatch.setenv("HUNKWISE_MACHINE", "laptop")
    started = traced(tmp_path)("worker", m.repos["laptop"], "review", "task-001",
                               "--verdict", "approve", "--session", REVIEWER)
    assert len(named(started, "fetch")) == 1 and len(named(started, "push")) == 1, started


def test_a_first_worker_start_reads_the_tree_once(make_repo: MakeRepo, coord: Cli,
                                                   tmp_path: Path) -> None:
    repo = make_repo({"a.txt": numbered(9)})
    ok(coord(repo, "assign", "A", "--title", "A", "--expect", "e", "--write", "a.txt:1-4"))
    set_line(repo, "a.txt", 2, "there before the task")  # its baseline, not its work
    started = traced(tmp_path)("worker", repo, "start", "A")
    assert len(named(started, "add")) == 1 and len(named(started, "write-tree")) == 1, started
    assert len(started) <= 6, started  # the snapshot (3), its diff, the reader, rev-parse


# ---- flat in reported tasks ----------------------------------------------------------------

def _counts(started: list[str]) -> dict[str, int]:
    from collections import Counter

    return dict(Counter(s.split(" ")[0] for s in started))


@pytest.mark.slow
def test_the_hot_commands_start_as_many_git_processes_at_1_50_and_1000_reported_tasks(
        make_repo: MakeRepo, coord: Cli, worker: Cli, tmp_path: Path) -> None:
    """`coord status` checks every reported task's record (are its snapshots still there,
    is any of its work gone): one `cat-file --batch-check` for all of them, one diff per
    commit the records were made on, never a process per task; `coord next` and
    `worker done` never start one per task either. Each record has a snapshot tree of its
    own; after a commit the records' base is no longer HEAD, and they are diffed again."""
    from testing.reported import reported_tasks, scene_files

    seen: dict[int, dict[str, dict[str, int]]] = {}
    run = traced(tmp_path)
    for n in (1, 50, 1000):
        repo = make_repo(scene_files(n))
        reported = reported_tasks(repo, coord, worker, n)
        assert len(reported) == n
        counts = {"status": _counts(run("coord", repo, "status"))}
        lost_before = ok(coord(repo, "status"))["lost"]
        write(repo, "z.txt", "unrelated\n")
        git(repo, "add", "z.txt")
        git(repo, "commit", "-q", "-m", "moves HEAD past every record's base")
        counts["status after a commit"] = _counts(run("coord", repo, "status"))
        counts["worker done"] = _counts(run("worker", repo, "done", "A"))
        counts["coord next"] = _counts(run("coord", repo, "next"))
        status = ok(coord(repo, "status"))
        assert lost_before == [] and status["lost"] == [], status["lost"]
        assert sum(t["state"] == "reported" for t in status["tasks"]) == n + 1
        seen[n] = counts
        assert counts["status"].get("cat-file", 0) <= 2, counts  # the reader, one batch-check
    assert seen[1] == seen[50] == seen[1000], seen


def test_a_record_whose_work_is_gone_is_listed_among_many(make_repo: MakeRepo, coord: Cli,
                                                          worker: Cli) -> None:
    """The one existence check and the shared diffs still find the one task whose work was
    overwritten, before and after HEAD moves, and only that one."""
    from testing.reported import reported_tasks, scene_files

    repo = make_repo(scene_files(6))
    reported_tasks(repo, coord, worker, 6)
    write(repo, "f/0003.txt", numbered(5))  # R0003's line, back to the commit's
    assert ok(coord(repo, "status"))["lost"] == [{"task": "R0003", "paths": ["f/0003.txt"]}]
    write(repo, "z.txt", "unrelated\n")
    git(repo, "add", "z.txt")
    git(repo, "commit", "-q", "-m", "moves HEAD")
    assert ok(coord(repo, "status"))["lost"] == [{"task": "R0003", "paths": ["f/0003.txt"]}]
