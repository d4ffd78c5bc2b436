"""Repositories as teams have them: SHA-256 object format, linked worktrees, index flags,
and files rewritten while a snapshot reads them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hunkwise.shared import git as hgit
from hunkwise.shared.errors import GitError, StateRefused
from hunkwise.shared.git import objects
from hunkwise.shared.hunks import diff, snapshot

from testing.cli import Cli, ok
from testing.repo import MakeRepo, git, git_bytes, numbered, write
from testing.wait import wait_until


def start(coord: Cli, worker: Cli, repo: Path, tid: str, *grants: str) -> None:
    writes = [a for g in grants for a in ("--write", g)]
    ok(coord(repo, "assign", tid, "--title", tid, "--expect", "e", *writes))
    ok(worker(repo, "start", tid))


def report_of(done: dict[str, Any]) -> dict[str, Any]:
    return json.loads(Path(done["report"]["file"]).read_text())


def inbox_new(repo: Path) -> list[str]:
    new = repo / ".git" / "coord" / "inbox" / "new"
    return os.listdir(new) if new.exists() else []


# ---- SHA-256 repositories -------------------------------------------------------------------

@pytest.fixture
def sha256_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo256"
    repo.mkdir()
    rc = subprocess.run(["git", "init", "-q", "-b", "main", "--object-format=sha256"], cwd=repo,
                        capture_output=True)
    if rc.returncode != 0:
        pytest.skip("this git cannot create SHA-256 repositories")
    write(repo, "keep.txt", numbered(6))
    write(repo, "gone.txt", "to be deleted\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "init")
    return repo


def test_a_sha256_repository_works_end_to_end(sha256_repo: Path, coord: Cli, worker: Cli) -> None:
    repo = sha256_repo
    assert len(git(repo, "rev-parse", "HEAD").strip()) == 64
    start(coord, worker, repo, "A", "keep.txt", "gone.txt", "new.txt")
    write(repo, "keep.txt", numbered(6).replace("line 3", "three"))
    write(repo, "new.txt", "brand new\n")
    (repo / "gone.txt").unlink()

    done = ok(worker(repo, "done", "A"))
    changes = {c["path"]: c for c in report_of(done)["changes"]}
    assert changes["new.txt"]["kind"] == "added" and changes["new.txt"]["old_oid"] is None
    assert changes["gone.txt"]["kind"] == "deleted" and changes["gone.txt"]["new_oid"] is None
    assert len(changes["keep.txt"]["old_oid"]) == 64
    assert ok(coord(repo, "review", "A"))["ok"] is True

    acc = ok(coord(repo, "accept", "A"))

    assert acc["commit"] == git(repo, "rev-parse", "HEAD").strip()
    assert sorted(git(repo, "ls-tree", "--name-only", "HEAD").split()) == ["keep.txt", "new.txt"]
    assert git_bytes(repo, "show", "HEAD:keep.txt") == numbered(6).replace("line 3", "three").encode()
    assert git(repo, "status", "--porcelain") == ""


def test_a_sha256_repository_without_commits_has_its_own_empty_tree(tmp_path: Path) -> None:
    repo = tmp_path / "unborn256"
    repo.mkdir()
    if subprocess.run(["git", "init", "-q", "--object-format=sha256"], cwd=repo).returncode:
        pytest.skip("this git cannot create SHA-256 repositories")
    write(repo, "a.txt", "a\n")
    snap = snapshot.take(repo)
    assert snap.head is None and len(snap.head_tree) == 64
    assert [c.path for c in diff.diff_trees(repo, snap.head_tree, snap.tree)] == ["a.txt"]


# ---- linked worktrees ---------------------------------------------------------------------

def test_commands_refuse_a_linked_worktree_naming_the_main_one(make_repo: MakeRepo, coord: Cli,
                                                               worker: Cli) -> None:
    repo = make_repo({"f.txt": numbered(5)})
    start(coord, worker, repo, "A", "f.txt:2-3")
    git(repo, "commit", "-q", "--allow-empty", "-m", "elsewhere")
    linked = repo.parent / "linked"
    git(repo, "worktree", "add", "-q", "-b", "other", str(linked), "HEAD~1")
    write(linked, "f.txt", "moved\n" + numbered(5))

    for r in (coord(linked, "status"), worker(linked, "done", "A"),
              coord(repo, "status", "--repo", str(linked))):
        assert r.code == 2, r.stdout + r.stderr
        message = r.doc["error"]["message"]
        assert "main working tree" in message and str(repo) in message, message

    tasks = {t["id"]: t for t in ok(coord(repo, "status"))["tasks"]}
    assert tasks["A"]["grants"] == ["f.txt:2-3"]
    assert tasks["A"]["state"] == "in_progress"


# ---- assume-unchanged and skip-worktree ------------------------------------------------------

@pytest.mark.parametrize("flag", ["--assume-unchanged", "--skip-worktree"])
def test_an_edit_of_a_flagged_file_is_reported_and_committed(make_repo: MakeRepo, coord: Cli,
                                                             worker: Cli, flag: str) -> None:
    repo = make_repo({"f.txt": numbered(5), "g.txt": "g\n"})
    git(repo, "update-index", flag, "f.txt", "g.txt")
    start(coord, worker, repo, "A", "f.txt")
    want = numbered(5).replace("line 4", "four")
    write(repo, "f.txt", want)

    done = ok(worker(repo, "done", "A"))

    assert [c["path"] for c in report_of(done)["changes"]] == ["f.txt"]
    assert ok(coord(repo, "accept", "A"))["paths"] == ["f.txt"]
    assert git_bytes(repo, "show", "HEAD:f.txt") == want.encode()


def test_a_flagged_file_deleted_on_disk_is_a_deletion_but_a_sparse_one_is_not(
        make_repo: MakeRepo) -> None:
    repo = make_repo({"a.txt": "a\n", "sparse.txt": "s\n"})
    git(repo, "update-index", "--assume-unchanged", "a.txt")
    git(repo, "update-index", "--skip-worktree", "sparse.txt")
    (repo / "a.txt").unlink()
    (repo / "sparse.txt").unlink()  # what a sparse checkout leaves: flagged and absent

    snap = snapshot.take(repo)

    changes = {c.path: c.status for c in diff.diff_trees(repo, snap.head_tree, snap.tree)}
    assert changes == {"a.txt": "D"}
    flags = git(repo, "ls-files", "-v")
    assert "h a.txt" in flags and "S sparse.txt" in flags  # the real index keeps its flags


# ---- files rewritten while a snapshot reads them -------------------------------------------------

FULL = numbered(3000, "stable line").encode()


def _rewrite_around_reads(monkeypatch: pytest.MonkeyPatch, path: Path, *,
                          torn_reads: int) -> list[int]:
    """The first `torn_reads` reads of the tree by `git add` catch `path` half-written (empty,
    as a writer that truncated it and has not written yet leaves it); the writer finishes
    right after each such read."""
    calls = [0]
    real = hgit.run

    def run(repo: Path | str, *args: str, **kw: Any) -> bytes:
        if args[:1] == ("add",):
            calls[0] += 1
            if calls[0] <= torn_reads:
                path.write_bytes(b"")
                try:
                    return real(repo, *args, **kw)
                finally:
                    path.write_bytes(FULL)
        return real(repo, *args, **kw)

    monkeypatch.setattr(hgit, "run", run)
    return calls


def test_a_file_caught_mid_write_never_reaches_a_report(make_repo: MakeRepo, coord: Cli,
                                                        worker: Cli,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    repo = make_repo({"f.txt": numbered(5), "big.txt": FULL})
    start(coord, worker, repo, "A", "f.txt")
    write(repo, "f.txt", numbered(5).replace("line 1", "one"))
    calls = _rewrite_around_reads(monkeypatch, repo / "big.txt", torn_reads=1)

    done = ok(worker(repo, "done", "A"))

    snap = report_of(done)["snapshot"]
    assert git_bytes(repo, "show", f"{snap}:big.txt") == FULL
    assert done["report"]["overlaps"] == []  # no phantom unowned change in big.txt
    assert calls[0] >= 2


def test_a_tree_that_keeps_changing_is_refused_with_exit_3(make_repo: MakeRepo, coord: Cli,
                                                           worker: Cli,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    repo = make_repo({"f.txt": numbered(5), "big.txt": FULL})
    # big.txt is a task's: its reads must agree (a file under no grant that never stops
    # changing is taken as read instead: tests/test_newcomer_wedges.py).
    ok(coord(repo, "assign", "B", "--title", "B", "--expect", "e", "--write", "big.txt"))
    start(coord, worker, repo, "A", "f.txt")
    write(repo, "f.txt", numbered(5).replace("line 1", "one"))
    _rewrite_around_reads(monkeypatch, repo / "big.txt", torn_reads=1000)

    r = worker(repo, "done", "A")

    assert r.code == 3, r.stdout + r.stderr
    assert "tree changing, retry" in r.doc["error"]["message"]
    assert inbox_new(repo) == []


def test_a_git_error_on_a_file_rewritten_mid_read_is_retried(make_repo: MakeRepo, coord: Cli,
                                                             worker: Cli,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    repo = make_repo({"f.txt": numbered(5)})
    start(coord, worker, repo, "A", "f.txt")
    write(repo, "f.txt", numbered(5).replace("line 1", "one"))
    real = hgit.run
    failures = [0]

    def run(repo: Path | str, *args: str, **kw: Any) -> bytes:
        if args[:1] == ("add",) and failures[0] < 2:
            failures[0] += 1  # what git does when the file it maps shrinks under it
            raise GitError(args, -7 if failures[0] == 1 else 128, b"fatal: short read")
        return real(repo, *args, **kw)

    monkeypatch.setattr(hgit, "run", run)

    done = ok(worker(repo, "done", "A"))
    assert done["report"]["changes"] == 1


def test_the_same_git_error_on_every_read_is_shown_as_it_is(make_repo: MakeRepo,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    repo = make_repo({"f.txt": "f\n"})
    real = hgit.run

    def run(repo: Path | str, *args: str, **kw: Any) -> bytes:
        if args[:1] == ("add",):
            raise GitError(args, 128, b"error: open(\"f.txt\"): Permission denied")
        return real(repo, *args, **kw)

    monkeypatch.setattr(hgit, "run", run)
    with pytest.raises(GitError, match="Permission denied"):
        snapshot.take(repo)


WRITER = r"""
import os, sys, time
path, stop, ready, content_file = sys.argv[1:5]
data = open(content_file, "rb").read()
deadline = time.monotonic() + 20  # bounded: stops by itself
n = 0
while time.monotonic() < deadline and not os.path.exists(stop):
    for _ in range(5):  # a burst of saves, as a formatter or a build step makes them
        with open(path, "wb") as f:  # truncate, then write: a reader can catch it in between
            f.write(data)
        time.sleep(0.002)
    n += 1
    if n == 2:
        open(ready, "w").close()
    time.sleep(0.05)
"""


@pytest.fixture
def rewriter(tmp_path: Path) -> Iterator[Callable[[Path, bytes], None]]:
    procs: list[tuple[subprocess.Popen[bytes], Path]] = []

    def launch(path: Path, content: bytes) -> None:
        stop, ready, src = tmp_path / "stop", tmp_path / "ready", tmp_path / "content"
        src.write_bytes(content)
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(stop), str(ready),
                                 str(src)])
        procs.append((proc, stop))
        wait_until(lambda: ready.exists() or proc.poll() is not None, what="the writer to start")

    yield launch
    for proc, stop in procs:
        stop.touch()
        proc.wait(timeout=30)


def test_snapshots_amid_a_rewriting_process_are_never_torn(make_repo: MakeRepo, coord: Cli,
                                                           worker: Cli, rewriter: Any) -> None:
    content = b"".join(b"row %06d of a generated file\n" % i for i in range(40000))  # ~1 MB
    repo = make_repo({"f.txt": numbered(5), "gen.txt": content})
    start(coord, worker, repo, "A", "f.txt")
    write(repo, "f.txt", numbered(5).replace("line 1", "one"))
    rewriter(repo / "gen.txt", content)

    consistent = 0
    for _ in range(25):
        try:
            snap = snapshot.take(repo)
        except StateRefused as e:
            assert "tree changing, retry" in e.message
            continue
        assert git_bytes(repo, "show", f"{snap.tree}:gen.txt") == content
        consistent += 1
    r = worker(repo, "done", "A")
    assert r.code in (0, 3), r.stdout + r.stderr
    if r.code == 0:
        snap_id = report_of(r.doc)["snapshot"]
        assert git_bytes(repo, "show", f"{snap_id}:gen.txt") == content
        assert r.doc["report"]["changes"] == 1
    else:
        assert "tree changing, retry" in r.doc["error"]["message"]
    assert consistent, "every snapshot was refused: the retries never settle"


def test_the_commands_one_reader_sees_refs_moved_and_objects_written_after_it_started(
        make_repo) -> None:
    """Every object and revision a command reads goes through one long-lived cat-file: it
    must answer for HEAD as it is now, and find an object written after it started."""
    from hunkwise.shared import git as g

    g.close_readers()  # those of other repos this test process read in-process before
    repo = make_repo({"a.txt": "one\n"})
    first, tree = g.head_and_tree(repo)
    assert first is not None and g.file_at(repo, "HEAD", "a.txt") == b"one\n"
    blob = objects.hash_blobs(repo, [b"two\n", b"three\n"])  # written after the reader started
    assert g.cat_blobs(repo, blob) == {blob[0]: b"two\n", blob[1]: b"three\n"}
    new_tree = objects.build_tree(repo, tree, {"a.txt": ("100644", blob[0])})
    commit = g.run(repo, "commit-tree", new_tree, "-p", first, "-m", "m").decode().strip()
    g.run(repo, "update-ref", "HEAD", commit, first)
    assert g.head(repo) == commit and g.head_tree(repo) == new_tree
    assert g.file_at(repo, "HEAD", "a.txt") == b"two\n"
    assert len(g._READERS) == 1  # one process answered all of it
    many = [f"{commit}:a.txt"] * 700 + ["HEAD:nothing-here"]  # more than one chunk
    found = g.read_objects(repo, many)
    assert [f[2] if f else None for f in found] == [b"two\n"] * 700 + [None]
    g.close_readers()
    assert g.head(repo) == commit  # a fresh reader after a close
    g.close_readers()


def _tree_by_index(repo: Path, base: str, entries: dict[str, tuple[str, str] | None]) -> str:
    """The reference: read-tree, update-index --index-info, write-tree in a throwaway index."""
    import tempfile

    from hunkwise.shared import git as g

    with tempfile.TemporaryDirectory() as tmp:
        env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
        g.run(repo, "read-tree", base, env=env)
        g.run(repo, "update-index", "-z", "--index-info", input=g.index_info(entries, repo), env=env)
        return g.run(repo, "write-tree", env=env).decode().strip()


@pytest.mark.parametrize("seed", range(12))
def test_write_tree_gives_the_tree_an_index_would(make_repo, seed: int) -> None:
    """Trees are built by one fast-import (blobs, a throwaway commit rooted at the base,
    its ref deleted again): for odd names, deletions, modes, a file turned directory and a
    directory turned file, the tree must be the one read-tree + update-index + write-tree
    give, and no ref may be left behind."""
    import random

    from hunkwise.shared import git as g

    rnd = random.Random(seed)
    names = ["a.txt", "sp ace.txt", 'q"uote', "back\\slash", "new\nline", "\"lead", "é.txt",
             os.fsdecode(b"raw\xff.bin"), "d/x.txt", "d/e/y.txt", "f", "tab\tname"]
    files = {n: f"{n!r} {i}\n" for i, n in enumerate(names) if rnd.random() < 0.7}
    files.setdefault("d/x.txt", "x\n")
    repo = make_repo({"keep.txt": "k\n"})
    for n, text in files.items():
        p = repo / os.fsencode(n).decode("utf-8", "surrogateescape")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(text.encode())
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    base = g.head_tree(repo)
    entries: dict[str, tuple[str, str] | None] = {}
    contents: dict[str, tuple[str, bytes]] = {}
    for n in list(files):
        r = rnd.random()
        if r < 0.25:
            entries[n] = None
        elif r < 0.5:
            contents[n] = (rnd.choice(["100644", "100755"]), f"changed {n!r}\n".encode())
    for n in names:
        if n not in files and rnd.random() < 0.4:
            contents[n] = ("100644", f"added {n!r}\n".encode())
    if rnd.random() < 0.5:  # a file becomes a directory
        entries["f"] = None
        contents["f/inner.txt"] = ("100644", b"inner\n")
    if rnd.random() < 0.5:  # a directory becomes a file (its one file deleted)
        entries["d/x.txt"] = None
        entries.update({k: None for k in files if k.startswith("d/")})
        contents = {k: v for k, v in contents.items() if not k.startswith("d/")}
        if "d/e/y.txt" not in files:
            contents["d"] = ("100644", b"now a file\n")
    contents.setdefault("link", ("120000", b"keep.txt"))
    tree, written = objects.write_tree(repo, base, entries, contents)
    expected_entries = dict(entries)
    expected_entries.update({p: (m, written[p]) for p, (m, _d) in contents.items()})
    assert tree == _tree_by_index(repo, base, expected_entries)
    assert g.cat_blobs(repo, [written[p] for p in contents]) == \
        {written[p]: d for p, (_m, d) in contents.items()}
    assert b"refs/hunkwise/tmp" not in g.run(repo, "for-each-ref")


def test_write_tree_on_an_unborn_branch(tmp_path) -> None:
    from hunkwise.shared import git as g

    repo = tmp_path / "unborn"
    repo.mkdir()
    git(repo, "init", "-q")
    tree, written = objects.write_tree(repo, g.empty_tree(repo), {}, {"a.txt": ("100644", b"a\n")})
    assert tree == _tree_by_index(repo, g.empty_tree(repo), {"a.txt": ("100644", written["a.txt"])})


def test_a_tree_diff_limited_to_paths_keeps_exactly_what_a_pathspec_would(make_repo) -> None:
    """diff_trees reads the whole raw diff once and filters it: a path, or a directory above
    it, selects it (git's literal pathspecs), and nothing else does."""
    from hunkwise.shared import git as g
    from hunkwise.shared.hunks import diff as d

    files = {"a.txt": "a\n", "ab.txt": "b\n", "d/x.txt": "x\n", "d/e/y.txt": "y\n", "de/z.txt": "z\n"}
    repo = make_repo(files)
    old = g.head_tree(repo)
    for name in files:
        write(repo, name, files[name] + "more\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "all")
    new = g.head_tree(repo)
    for spec in (["a.txt"], ["d"], ["d/"], ["d/e"], ["de", "a.txt"], ["nothing"], ["a"]):
        got = sorted(c.path for c in d.diff_trees(repo, old, new, spec))
        out = g.run(repo, "diff-tree", "-r", "-z", "--name-only", old, new, "--", *spec,
                    env={"GIT_LITERAL_PATHSPECS": "1"})
        assert got == sorted(os.fsdecode(p) for p in out.split(b"\0") if p), spec


def test_a_big_import_keeps_its_pack_and_every_object_reads_back(make_repo: MakeRepo) -> None:
    """Over objects.BIG_IMPORT bytes, fast-import's pack is kept as it is (git would
    unpack it into whole loose objects): the blobs and trees written read back the same."""
    repo = make_repo({"a.txt": "a\n"})
    big = b"".join(b"line %d\n" % i for i in range(objects.BIG_IMPORT // 8))
    versions = [big + b"v%d\n" % k for k in range(3)]
    assert sum(map(len, versions)) > objects.BIG_IMPORT
    packs = set((repo / ".git/objects/pack").glob("*.pack"))
    head_tree = git(repo, "rev-parse", "HEAD^{tree}").strip()
    out = objects.write_trees(repo, [(head_tree, {}, {"big.txt": ("100644", v)}) for v in versions])
    assert set((repo / ".git/objects/pack").glob("*.pack")) - packs  # one pack kept
    for (tree, blobs), v in zip(out, versions, strict=True):
        assert git_bytes(repo, "cat-file", "blob", blobs["big.txt"]) == v
        assert git(repo, "rev-parse", f"{tree}:big.txt").strip() == blobs["big.txt"]
        assert git(repo, "rev-parse", f"{tree}:a.txt") == git(repo, "rev-parse", "HEAD:a.txt")
