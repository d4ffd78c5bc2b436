"""`coord accept` and the other verdicts, driven through the CLI on real repositories.

Every accepted commit is compared byte for byte with the blobs, modes and tree it must
hold: HEAD's tree plus exactly the task's changes, nothing of the other tasks' edits that
share the working tree (and often the very same file).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testing.cli import Cli, assign_and_start, error_message, ok
from testing.env import BIN
from testing.repo import MakeRepo, git, git_bytes, numbered, set_line, write
from testing.wait import wait_until

# ---- helpers ----------------------------------------------------------------------------

def assign(coord: Cli, repo: Path, tid: str, *grants: str, checks: tuple[str, ...] = ()) -> dict:
    args = ["assign", tid, "--title", f"title of {tid}", "--expect", f"{tid} works"]
    for g in grants:
        args += ["--write", g]
    for c in checks:
        args += ["--check", c]
    return ok(coord(repo, *args))


def start(worker: Cli, repo: Path, tid: str) -> str:
    doc = ok(worker(repo, "start", tid))
    assert doc["task"]["state"] == "in_progress"
    return doc["session"]


def done(worker: Cli, repo: Path, tid: str, message: str | None = None, *extra: str,
         session: str | None = None) -> dict:
    args = ["done", tid, *extra]
    if message is not None:
        args += ["--commit-message", message]
    return ok(worker(repo, *args, session=session))


def begin(coord: Cli, worker: Cli, repo: Path, tid: str, *grants: str,
          checks: tuple[str, ...] = ()) -> str:
    assign(coord, repo, tid, *grants, checks=checks)
    return start(worker, repo, tid)


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


def tree_of(repo: Path, rev: str = "HEAD") -> dict[str, tuple[str, bytes]]:
    """{path: (mode, bytes)} of every blob in REV (symlinks: the target as bytes)."""
    out = git_bytes(repo, "ls-tree", "-r", "-z", "--full-tree", rev)
    result: dict[str, tuple[str, bytes]] = {}
    for rec in out.split(b"\0"):
        if not rec:
            continue
        meta, _, path = rec.partition(b"\t")
        mode, kind, oid = meta.decode().split(" ")
        assert kind == "blob", rec
        result[os.fsdecode(path)] = (mode, git_bytes(repo, "cat-file", "blob", oid))
    return result


def blob(repo: Path, path: str, rev: str = "HEAD") -> bytes:
    return git_bytes(repo, "cat-file", "-p", f"{rev}:{path}")


def commit_message(repo: Path, rev: str = "HEAD") -> bytes:
    """The commit's message less its Coord-Session trailer (the worker's generated session
    id; tests/test_review_sessions.py checks it)."""
    raw = git_bytes(repo, "cat-file", "commit", rev)
    return re.sub(rb"(?m)^Coord-Session: \S+\n", b"", raw.split(b"\n\n", 1)[1])


def parents(repo: Path, rev: str = "HEAD") -> list[str]:
    return git(repo, "rev-list", "--parents", "-n", "1", rev).split()[1:]


def porcelain(repo: Path) -> str:
    return git(repo, "status", "--porcelain", "--untracked-files=all")


def work_files(repo: Path) -> dict[str, tuple[str, bytes]]:
    """{path: (mode, bytes)} of every file of the working tree outside .git."""
    out: dict[str, tuple[str, bytes]] = {}
    for dirpath, dirnames, filenames in os.walk(repo):
        if ".git" in dirnames:
            dirnames.remove(".git")
        for name in filenames:
            full = Path(dirpath) / name
            rel = full.relative_to(repo).as_posix()
            if full.is_symlink():
                out[rel] = ("120000", os.fsencode(os.readlink(full)))
            else:
                mode = "100755" if os.access(full, os.X_OK) else "100644"
                out[rel] = (mode, full.read_bytes())
    return out


def lines_with(base: str, **changes: str) -> bytes:
    """`base` with line N replaced, given as l5="text" (1-based)."""
    rows = base.split("\n")
    for key, text in changes.items():
        rows[int(key[1:]) - 1] = text
    return "\n".join(rows).encode()


def task_doc(coord: Cli, repo: Path, tid: str) -> dict:
    tasks = {t["id"]: t for t in ok(coord(repo, "status"))["tasks"]}
    return tasks[tid]


def finding_codes(coord: Cli, repo: Path, tid: str) -> set[str]:
    r = coord(repo, "review", tid)
    return {f["code"] for f in r.doc["findings"]}


# ---- two tasks, one file -------------------------------------------------------------

def test_two_tasks_in_one_hunk_of_one_file_commit_separately(make_repo: MakeRepo, coord: Cli,
                                                            worker: Cli) -> None:
    base = numbered(10)
    repo = make_repo({"f.txt": base, "other.txt": "other\n"})
    root = head(repo)
    begin(coord, worker, repo, "A", "f.txt:1-5")
    begin(coord, worker, repo, "B", "f.txt:6-10")
    set_line(repo, "f.txt", 5, "line 5 by A")
    set_line(repo, "f.txt", 7, "line 7 by B")
    # In a default-context diff both edits are one hunk: the split must be by line.
    full = git(repo, "diff", "--no-ext-diff", "--no-color", "f.txt")
    assert [ln for ln in full.split("\n") if ln.startswith("@@ ")] == ["@@ -2,9 +2,9 @@ line 1"]
    done(worker, repo, "A", "Fix line five")
    done(worker, repo, "B", "Fix line seven\n\nLonger explanation.")

    a = ok(coord(repo, "accept", "A"))
    assert a["task"] == "A" and a["paths"] == ["f.txt"]
    assert a["commit"] == head(repo)
    assert parents(repo) == [root]
    assert tree_of(repo) == {"f.txt": ("100644", lines_with(base, l5="line 5 by A")),
                             "other.txt": ("100644", b"other\n")}
    assert commit_message(repo) == b"Fix line five\n\nCoord-Task: A\n"
    # B's change is still in the tree, exactly, and nothing is staged.
    assert porcelain(repo) == " M f.txt\n"
    assert git(repo, "diff", "--cached", "--name-only") == ""
    assert (repo / "f.txt").read_bytes() == lines_with(base, l5="line 5 by A", l7="line 7 by B")
    diff_rest = git(repo, "diff", "-U0", "--no-color", "--no-ext-diff", "f.txt")
    assert [ln for ln in diff_rest.split("\n") if ln[:1] in ("+", "-") and ln[:3] not in ("---", "+++")] \
        == ["-line 7", "+line 7 by B"]

    b = ok(coord(repo, "accept", "B"))
    assert b["commit"] == head(repo) and parents(repo) == [a["commit"]]
    assert tree_of(repo) == {"f.txt": ("100644", lines_with(base, l5="line 5 by A", l7="line 7 by B")),
                             "other.txt": ("100644", b"other\n")}
    assert commit_message(repo) == b"Fix line seven\n\nLonger explanation.\n\nCoord-Task: B\n"
    assert porcelain(repo) == ""
    assert task_doc(coord, repo, "A")["state"] == "accepted"
    assert task_doc(coord, repo, "B")["commit"] == b["commit"]


def test_accept_message_option_overrides_the_report(make_repo: MakeRepo, coord: Cli,
                                                     worker: Cli) -> None:
    repo = make_repo({"f.txt": numbered(3)})
    begin(coord, worker, repo, "A", "f.txt")
    set_line(repo, "f.txt", 1, "one")
    done(worker, repo, "A", "worker's subject")
    ok(coord(repo, "accept", "A", "--message", "Coordinator subject\n\nbody text"))
    assert commit_message(repo) == b"Coordinator subject\n\nbody text\n\nCoord-Task: A\n"


def test_insertion_above_another_range_keeps_the_older_report_valid(make_repo: MakeRepo, coord: Cli,
                                                                   worker: Cli) -> None:
    base = numbered(20)
    repo = make_repo({"f.txt": base})
    begin(coord, worker, repo, "A", "f.txt:1-5")
    begin(coord, worker, repo, "B", "f.txt:10-15")
    rows = base.split("\n")
    rows[12 - 1] = "line 12 by B"
    rows[2:2] = ["new a1", "new a2", "new a3"]  # after line 2
    final = "\n".join(rows).encode()
    (repo / "f.txt").write_bytes(final)
    done(worker, repo, "B", "B edits twelve")  # reported BEFORE A's commit
    done(worker, repo, "A", "A inserts three")

    a = ok(coord(repo, "accept", "A"))
    only_a = base.split("\n")
    only_a[2:2] = ["new a1", "new a2", "new a3"]
    assert tree_of(repo) == {"f.txt": ("100644", "\n".join(only_a).encode())}
    # B's report names line 12 (old numbering); HEAD now has it at 15, and B's grant followed.
    assert task_doc(coord, repo, "B")["grants"] == ["f.txt:13-18"]
    assert ok(coord(repo, "review", "B"))["ok"] is True
    b = ok(coord(repo, "accept", "B"))
    assert parents(repo) == [a["commit"]]
    assert tree_of(repo) == {"f.txt": ("100644", final)}
    assert blob(repo, "f.txt", "HEAD~1") == "\n".join(only_a).encode()
    assert porcelain(repo) == ""
    assert b["paths"] == ["f.txt"]


def test_repeated_closing_brace_lines_are_placed_by_position(make_repo: MakeRepo, coord: Cli,
                                                             worker: Cli) -> None:
    base = "fn a() {\n    one\n}\n\nfn b() {\n    two\n}\n"
    repo = make_repo({"src.rs": base})
    begin(coord, worker, repo, "A", "src.rs:1-3")
    begin(coord, worker, repo, "B", "src.rs:5-7")
    # Both tasks turn a "}" into "};" (identical hunks) and add a line before it.
    final = "fn a() {\n    one\n    a2\n};\n\nfn b() {\n    two\n    b2\n};\n"
    write(repo, "src.rs", final)
    done(worker, repo, "B", "B")
    done(worker, repo, "A", "A")
    ok(coord(repo, "accept", "B"))
    assert blob(repo, "src.rs") == b"fn a() {\n    one\n}\n\nfn b() {\n    two\n    b2\n};\n"
    ok(coord(repo, "accept", "A"))
    assert blob(repo, "src.rs") == final.encode()
    assert blob(repo, "src.rs", "HEAD~1") == b"fn a() {\n    one\n}\n\nfn b() {\n    two\n    b2\n};\n"
    assert porcelain(repo) == ""


def test_user_diff_configuration_changes_nothing(make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
    base = numbered(12)
    repo = make_repo({"f.txt": base, "g.txt": "g\n"})
    for key, value in (("diff.algorithm", "histogram"), ("color.ui", "always"),
                       ("diff.noprefix", "true"), ("diff.external", "/bin/false"),
                       ("diff.mnemonicPrefix", "true"), ("diff.context", "10"),
                       ("diff.renames", "copies"), ("core.quotePath", "true")):
        git(repo, "config", key, value)
    begin(coord, worker, repo, "A", "f.txt:1-6", "g.txt")
    begin(coord, worker, repo, "B", "f.txt:7-12")
    set_line(repo, "f.txt", 5, "five by A")
    set_line(repo, "f.txt", 8, "eight by B")
    write(repo, "g.txt", "g by A\n")
    done(worker, repo, "A", "A")
    done(worker, repo, "B", "B")
    a = ok(coord(repo, "accept", "A"))
    assert a["paths"] == ["f.txt", "g.txt"]
    assert tree_of(repo) == {"f.txt": ("100644", lines_with(base, l5="five by A")),
                             "g.txt": ("100644", b"g by A\n")}
    ok(coord(repo, "accept", "B"))
    assert tree_of(repo) == {"f.txt": ("100644", lines_with(base, l5="five by A", l8="eight by B")),
                             "g.txt": ("100644", b"g by A\n")}
    assert porcelain(repo) == ""


# ---- every kind of change under a glob grant --------------------------------------------

def test_every_kind_of_change_is_committed_exactly(make_repo: MakeRepo, coord: Cli,
                                                   worker: Cli) -> None:
    repo = make_repo({
        "pkg/mod.txt": "a\nb\nc\n",
        "pkg/gone.txt": "bye\n",
        "pkg/img.bin": b"\x89PNG\0\x01\x02\n\xff",
        "pkg/run.sh": "#!/bin/sh\necho hi\n",
        "pkg/nonl.txt": "x\ny",
        "pkg/addnl.txt": "no newline",
        "pkg/crlf.txt": b"one\r\ntwo\r\nthree\r\n",
        "pkg/latin1.txt": b"caf\xe9\nna\xefve\n",
        "pkg/full.txt": "to be emptied\n",
        "pkg/moved-from.txt": "moving content\n",
        "pkg/sp ace.txt": "space\n",
        "pkg/ünï.txt": "unicode\n",
        "pkg/becomes-link": "was a file\n",
        "pkg/tool.py": "print(1)\n",
        "pkg/dir/inner.txt": "dir becomes a file\n",
        "pkg/file-becomes-dir": "file becomes a dir\n",
        "outside.txt": "keep me\n",
    })
    before = tree_of(repo)
    begin(coord, worker, repo, "A", "pkg/**")
    write(repo, "pkg/mod.txt", "a\nB\nc\nd\n")
    (repo / "pkg/gone.txt").unlink()
    write(repo, "pkg/img.bin", b"\x89PNG\0\x03\x04\n\xfe\xfd")
    os.chmod(repo / "pkg/run.sh", 0o755)
    os.symlink("mod.txt", repo / "pkg/link")
    write(repo, "pkg/nonl.txt", "x\nY")
    write(repo, "pkg/addnl.txt", "no newline\n")
    write(repo, "pkg/crlf.txt", b"one\r\nTWO\r\nthree\r\nfour\r\n")
    write(repo, "pkg/latin1.txt", b"caf\xe9\nna\xefve cr\xe8me br\xfbl\xe9e\n")
    write(repo, "pkg/full.txt", b"")
    write(repo, "pkg/new-empty.txt", b"")
    os.rename(repo / "pkg/moved-from.txt", repo / "pkg/moved-to.txt")
    write(repo, "pkg/sp ace.txt", "space edited\n")
    write(repo, 'pkg/quo"te \'s.txt', "quoted\n")
    write(repo, "pkg/ünï.txt", "unicode édité\n")
    write(repo, "pkg/deeper/new dir/ñ.txt", "nested\n")
    (repo / "pkg/becomes-link").unlink()
    os.symlink("../outside.txt", repo / "pkg/becomes-link")
    write(repo, "pkg/tool.py", "print(2)\n")
    os.chmod(repo / "pkg/tool.py", 0o755)
    (repo / "pkg/dir/inner.txt").unlink()
    (repo / "pkg/dir").rmdir()
    write(repo, "pkg/dir", "now a file\n")
    (repo / "pkg/file-becomes-dir").unlink()
    write(repo, "pkg/file-becomes-dir/inside.txt", "now a dir\n")
    write(repo, "outside.txt", "keep me, edited by nobody\n")  # owned by no task
    root = head(repo)
    done(worker, repo, "A", "every kind")

    a = ok(coord(repo, "accept", "A"))
    assert parents(repo) == [root]
    expected = {p: e for p, e in work_files(repo).items() if p.startswith("pkg/")}
    expected["outside.txt"] = before["outside.txt"]
    got = tree_of(repo)
    assert got == expected
    assert got["pkg/run.sh"][0] == "100755"
    assert got["pkg/link"] == ("120000", b"mod.txt")
    assert got["pkg/crlf.txt"][1] == b"one\r\nTWO\r\nthree\r\nfour\r\n"
    assert got["pkg/nonl.txt"][1] == b"x\nY"
    assert "pkg/gone.txt" not in got and "pkg/moved-from.txt" not in got
    assert got["pkg/moved-to.txt"] == ("100644", b"moving content\n")
    assert got["pkg/becomes-link"] == ("120000", b"../outside.txt")
    assert got["pkg/tool.py"] == ("100755", b"print(2)\n")
    assert got["pkg/dir"] == ("100644", b"now a file\n")
    assert got["pkg/file-becomes-dir/inside.txt"] == ("100644", b"now a dir\n")
    assert set(a["paths"]) == {p for p in set(before) ^ set(got)} | {
        p for p in set(before) & set(got) if before[p] != got[p]}
    # Only the unowned change is left, unstaged.
    assert porcelain(repo) == " M outside.txt\n"
    assert (repo / "outside.txt").read_bytes() == b"keep me, edited by nobody\n"


def test_autocrlf_true_commits_the_normalised_blobs(make_repo: MakeRepo, coord: Cli,
                                                   worker: Cli) -> None:
    base = "a\nb\nc\nd\ne\nf\n"
    repo = make_repo({"t.txt": base})
    git(repo, "config", "core.autocrlf", "true")
    begin(coord, worker, repo, "A", "t.txt:1-3", "new.txt")
    begin(coord, worker, repo, "B", "t.txt:4-6")
    write(repo, "t.txt", b"a\r\nB\r\nc\r\nd\r\nE\r\nf\r\n")
    write(repo, "new.txt", b"crlf\r\nfile\r\n")
    done(worker, repo, "A", "A")
    done(worker, repo, "B", "B")
    ok(coord(repo, "accept", "A"))
    assert tree_of(repo) == {"t.txt": ("100644", b"a\nB\nc\nd\ne\nf\n"),
                             "new.txt": ("100644", b"crlf\nfile\n")}
    ok(coord(repo, "accept", "B"))
    assert tree_of(repo) == {"t.txt": ("100644", b"a\nB\nc\nd\nE\nf\n"),
                             "new.txt": ("100644", b"crlf\nfile\n")}
    assert porcelain(repo) == ""
    assert (repo / "t.txt").read_bytes() == b"a\r\nB\r\nc\r\nd\r\nE\r\nf\r\n"


def test_crlf_file_split_between_two_range_grants(make_repo: MakeRepo, coord: Cli,
                                                  worker: Cli) -> None:
    base = b"".join(b"row %d\r\n" % i for i in range(1, 9))
    repo = make_repo({"w.txt": base})
    begin(coord, worker, repo, "A", "w.txt:1-4")
    begin(coord, worker, repo, "B", "w.txt:5-8")
    final = base.replace(b"row 3\r\n", b"row 3 A\r\n").replace(b"row 6\r\n", b"row 6 B\r\n")
    write(repo, "w.txt", final)
    done(worker, repo, "A", "A")
    done(worker, repo, "B", "B")
    ok(coord(repo, "accept", "A"))
    assert blob(repo, "w.txt") == base.replace(b"row 3\r\n", b"row 3 A\r\n")
    ok(coord(repo, "accept", "B"))
    assert blob(repo, "w.txt") == final


# ---- refusals ---------------------------------------------------------------------------

def test_hunk_straddling_two_ranges_is_refused(make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
    base = numbered(10)
    repo = make_repo({"f.txt": base})
    root = head(repo)
    begin(coord, worker, repo, "A", "f.txt:1-5")
    begin(coord, worker, repo, "B", "f.txt:6-10")
    write(repo, "f.txt", lines_with(base, l5="five by A", l6="six by A"))
    # Two new lines where A's last and B's first were: A replaced one of its own with
    # both and B deleted its own, or each replaced its own: the file cannot tell, and
    # nothing recorded who wrote them. `worker done` asks, and delivers nothing.
    r = worker(repo, "done", "A")
    assert r.code == 1 and "f.txt:5-6" in error_message(r) and "B" in error_message(r)
    assert "--claim" in error_message(r) and "--disclaim" in error_message(r)
    assert ok(coord(repo, "inbox"))["reports"] == []  # nothing was delivered
    assert head(repo) == root
    assert git(repo, "diff", "--cached", "--name-only") == ""
    assert (repo / "f.txt").read_bytes() == lines_with(base, l5="five by A", l6="six by A")
    st = ok(coord(repo, "status"))
    assert [a["path"] for a in st["ambiguous"]] == ["f.txt"]


def test_insertion_on_the_boundary_of_two_ranges_is_refused(make_repo: MakeRepo, coord: Cli,
                                                            worker: Cli) -> None:
    base = numbered(10)
    repo = make_repo({"f.txt": base})
    root = head(repo)
    begin(coord, worker, repo, "A", "f.txt:1-5")
    begin(coord, worker, repo, "B", "f.txt:6-10")
    rows = base.split("\n")
    rows[5:5] = ["inserted between five and six"]
    write(repo, "f.txt", "\n".join(rows))
    # The insertion lies inside both ranges: ambiguous. A claims it; B, still in progress,
    # may claim it too, so nothing of it is committed yet.
    done(worker, repo, "A", "A", "--claim", "f.txt:6")
    r = coord(repo, "accept", "A")
    assert r.code == 1, r.stdout
    assert head(repo) == root
    assert "ambiguous" in finding_codes(coord, repo, "A")
    # B claims it as well: both accepts refuse, naming the ambiguity; nothing is guessed.
    done(worker, repo, "B", "B", "--claim", "all")
    for tid in ("A", "B"):
        r = coord(repo, "accept", tid)
        assert r.code == 1 and "ambiguous" in error_message(r), r.stdout
        assert head(repo) == root


def test_index_dirty_refuses_and_keeps_the_staged_entry(make_repo: MakeRepo, coord: Cli,
                                                       worker: Cli) -> None:
    repo = make_repo({"f.txt": numbered(3), "x.txt": "x\n"})
    root = head(repo)
    begin(coord, worker, repo, "A", "f.txt")
    set_line(repo, "f.txt", 2, "two")
    done(worker, repo, "A", "A")
    write(repo, "x.txt", "staged by someone\n")
    git(repo, "add", "x.txt")
    r = coord(repo, "accept", "A")
    assert r.code == 1
    assert "index-dirty" in error_message(r)
    assert "index-dirty" in finding_codes(coord, repo, "A")
    assert head(repo) == root
    assert git(repo, "diff", "--cached", "--name-only") == "x.txt\n"
    st = ok(coord(repo, "status"))
    assert st["index_dirty"] is True
    git(repo, "restore", "--staged", "x.txt")
    ok(coord(repo, "accept", "A"))
    assert blob(repo, "f.txt") == b"line 1\ntwo\nline 3\n"
    assert blob(repo, "x.txt") == b"x\n"


def test_unmerged_index_entries_refuse(make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
    repo = make_repo({"f.txt": numbered(3), "m.txt": "base\n"})
    root = head(repo)
    git(repo, "checkout", "-q", "-b", "side")
    write(repo, "m.txt", "side\n")
    git(repo, "commit", "-q", "-am", "side")
    git(repo, "checkout", "-q", "main")
    write(repo, "m.txt", "main\n")
    git(repo, "commit", "-q", "-am", "main")
    mid = head(repo)
    assert git(repo, "merge", "-q", "side", check=False)  # leaves a conflict
    assert "m.txt" in git(repo, "ls-files", "-u")
    begin(coord, worker, repo, "A", "f.txt")
    set_line(repo, "f.txt", 1, "one")
    done(worker, repo, "A", "A")
    r = coord(repo, "accept", "A")
    assert r.code == 1
    assert "index-dirty" in error_message(r)
    assert head(repo) == mid != root
    assert "m.txt" in git(repo, "ls-files", "-u")


def test_tree_changed_after_the_report_is_refused(make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
    repo = make_repo({"f.txt": numbered(6), "n.txt": "n\n"})
    root = head(repo)
    begin(coord, worker, repo, "A", "f.txt", "n.txt")
    set_line(repo, "f.txt", 2, "two")
    done(worker, repo, "A", "A")
    set_line(repo, "f.txt", 2, "two, edited again")
    r = coord(repo, "accept", "A")
    assert r.code == 1
    assert {"stale-report", "unreported-change"} & finding_codes(coord, repo, "A")
    assert head(repo) == root
    # A whole new change after the report is refused too.
    set_line(repo, "f.txt", 2, "two")
    assert ok(coord(repo, "review", "A"))["ok"] is True
    write(repo, "n.txt", "n changed late\n")
    r = coord(repo, "accept", "A")
    assert r.code == 1
    assert "unreported-change" in finding_codes(coord, repo, "A")
    assert head(repo) == root


def test_reported_change_gone_from_the_tree_is_refused(make_repo: MakeRepo, coord: Cli,
                                                      worker: Cli) -> None:
    repo = make_repo({"f.txt": numbered(6)})
    root = head(repo)
    begin(coord, worker, repo, "A", "f.txt")
    set_line(repo, "f.txt", 2, "two")
    done(worker, repo, "A", "A")
    git(repo, "checkout", "--", "f.txt")
    r = coord(repo, "accept", "A")
    assert r.code == 1
    assert "missing-change" in finding_codes(coord, repo, "A")
    assert head(repo) == root


def test_changes_outside_every_grant_are_never_committed(make_repo: MakeRepo, coord: Cli,
                                                         worker: Cli) -> None:
    base = numbered(10)
    repo = make_repo({"f.txt": base, "free.txt": "free\n"})
    begin(coord, worker, repo, "A", "f.txt:1-4")
    set_line(repo, "f.txt", 2, "two by A")
    set_line(repo, "f.txt", 8, "eight by nobody")
    write(repo, "free.txt", "free edited\n")
    write(repo, "stray.txt", "untracked\n")
    done(worker, repo, "A", "A")
    ok(coord(repo, "accept", "A"))
    assert tree_of(repo) == {"f.txt": ("100644", lines_with(base, l2="two by A")),
                             "free.txt": ("100644", b"free\n")}
    st = ok(coord(repo, "status"))
    unowned = sorted(u["path"] for u in st["unowned"])
    assert unowned == ["f.txt", "free.txt", "stray.txt"]
    assert porcelain(repo) == " M f.txt\n M free.txt\n?? stray.txt\n"


# ---- concurrency with plain git ------------------------------------------------------------

def test_head_moved_by_someone_else_is_kept_as_parent(make_repo: MakeRepo, coord: Cli,
                                                     worker: Cli) -> None:
    repo = make_repo({"f.txt": numbered(4)})
    begin(coord, worker, repo, "A", "f.txt")
    set_line(repo, "f.txt", 3, "three")
    done(worker, repo, "A", "A")
    write(repo, "unrelated.txt", "someone else's\n")
    git(repo, "add", "unrelated.txt")
    git(repo, "commit", "-q", "-m", "unrelated")
    theirs = head(repo)
    a = ok(coord(repo, "accept", "A"))
    assert parents(repo, a["commit"]) == [theirs]
    assert head(repo) == a["commit"]
    assert tree_of(repo) == {"f.txt": ("100644", b"line 1\nline 2\nthree\nline 4\n"),
                             "unrelated.txt": ("100644", b"someone else's\n")}
    assert porcelain(repo) == ""


def test_head_moving_during_accept_is_retried(make_repo: MakeRepo, coord: Cli, worker: Cli,
                                              tmp_path: Path) -> None:
    """A commit lands between the accept's snapshot and its ref update (inside --recheck)."""
    repo = make_repo({"f.txt": numbered(4)})
    marker = tmp_path / "sneaked"
    sneak = (f"if [ ! -e '{marker}' ]; then touch '{marker}'; "
             f"git -C '{repo}' commit -q --allow-empty -m sneaky; fi; true")
    begin(coord, worker, repo, "A", "f.txt", checks=(sneak,))
    set_line(repo, "f.txt", 1, "one")
    done(worker, repo, "A", "A", "--no-run-checks")
    root = head(repo)
    a = ok(coord(repo, "accept", "A", "--recheck"))
    sneaky = parents(repo, a["commit"])
    assert len(sneaky) == 1 and sneaky[0] != root
    assert commit_message(repo, sneaky[0]) == b"sneaky\n"
    assert parents(repo, sneaky[0]) == [root]
    assert blob(repo, "f.txt") == b"one\nline 2\nline 3\nline 4\n"


def _log_ref_transactions(repo: Path, log: Path, refuse: str | None = None) -> None:
    """A reference-transaction hook that appends each call (its state, then the refs it
    names) to `log`; with `refuse`, it refuses a prepared transaction naming that ref."""
    hook = repo / ".git" / "hooks" / "reference-transaction"
    hook.parent.mkdir(exist_ok=True)
    refusal = (f'if [ "$1" = prepared ] && printf "%s" "$input" | grep -q " {refuse}$"; '
               "then exit 1; fi\n") if refuse else ""
    hook.write_text(f"#!/bin/sh\ninput=$(cat)\nprintf '%s\\n%s\\n\\n' \"$1\" \"$input\" >> '{log}'\n"
                    + refusal + "exit 0\n")
    hook.chmod(0o755)


def _ref_transactions(log: Path) -> list[tuple[str, set[str]]]:
    out = []
    for block in log.read_text().split("\n\n"):
        lines = block.strip().split("\n")
        if lines and lines[0]:
            out.append((lines[0], {line.split(" ")[2] for line in lines[1:] if line}))
    return out


def test_head_moves_and_the_task_refs_go_in_one_transaction(make_repo: MakeRepo, coord: Cli,
                                                            worker: Cli, tmp_path: Path) -> None:
    repo = make_repo({"f.txt": numbered(4)})
    begin(coord, worker, repo, "A", "f.txt")
    set_line(repo, "f.txt", 2, "two")
    done(worker, repo, "A", "A")
    set_line(repo, "f.txt", 2, "TWO")
    done(worker, repo, "A", "A")  # revision 2 supersedes 1; both snapshots are kept
    snaps = {f"refs/hunkwise/snapshots/A/r{n}" for n in (1, 2)}
    assert set(git(repo, "for-each-ref", "--format=%(refname)", "refs/hunkwise/").split()) == snaps
    log = tmp_path / "transactions"
    _log_ref_transactions(repo, log)
    a = ok(coord(repo, "accept", "A"))
    moved = [refs for state, refs in _ref_transactions(log)
             if state == "committed" and "refs/heads/main" in refs]
    assert len(moved) == 1 and snaps <= moved[0]
    assert head(repo) == a["commit"]
    assert git(repo, "for-each-ref", "--format=%(refname)", "refs/hunkwise/") == ""


def test_a_refused_head_move_keeps_the_task_refs(make_repo: MakeRepo, coord: Cli, worker: Cli,
                                                 tmp_path: Path) -> None:
    repo = make_repo({"f.txt": numbered(4)})
    begin(coord, worker, repo, "A", "f.txt")
    set_line(repo, "f.txt", 2, "two")
    done(worker, repo, "A", "A")
    root = head(repo)
    _log_ref_transactions(repo, tmp_path / "transactions", refuse="refs/heads/main")
    r = coord(repo, "accept", "A")
    assert r.code == 3 and "refused to move HEAD" in r.doc["error"]["message"]
    assert head(repo) == root
    assert task_doc(coord, repo, "A")["state"] == "reported"
    assert git(repo, "for-each-ref", "--format=%(refname)", "refs/hunkwise/").split() == \
        ["refs/hunkwise/snapshots/A/r1"]


def test_index_lock_held_briefly_is_waited_for(make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
    repo = make_repo({"f.txt": numbered(4)})
    begin(coord, worker, repo, "A", "f.txt")
    set_line(repo, "f.txt", 4, "four")
    done(worker, repo, "A", "A")
    lock = repo / ".git" / "index.lock"
    lock.write_bytes(b"")
    trace = repo.parent / "accept.trace"
    proc = subprocess.Popen([str(BIN / "coord"), "accept", "A", "--json"], cwd=repo,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ, GIT_TRACE=str(trace)))

    def index_writes() -> int:
        text = trace.read_text(errors="replace") if trace.exists() else ""
        return len(re.findall(r"trace: built-in: git .*update-index", text))
    try:
        # Two attempts at the index while it is locked: accept waits and tries again
        # (a second attempt cannot happen without the retry, however slow the machine).
        wait_until(lambda: index_writes() >= 2 or proc.poll() is not None, what="a retry")
        assert proc.poll() is None, "accept finished while index.lock was held"
        lock.unlink()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err.decode()
    doc = json.loads(out)
    assert not doc.get("warnings"), doc
    assert doc["commit"] == head(repo)
    assert blob(repo, "f.txt") == b"line 1\nline 2\nline 3\nfour\n"
    assert git(repo, "diff", "--cached", "--name-only") == ""
    assert porcelain(repo) == ""


# ---- state refusals --------------------------------------------------------------------------

def test_accepting_twice_is_refused(make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
    repo = make_repo({"f.txt": numbered(3)})
    begin(coord, worker, repo, "A", "f.txt")
    set_line(repo, "f.txt", 1, "one")
    done(worker, repo, "A", "A")
    first = ok(coord(repo, "accept", "A"))
    r = coord(repo, "accept", "A")
    assert r.code == 3
    assert r.doc["error"]["code"] == 3
    assert head(repo) == first["commit"]
    # Nor can an accepted task be sent back, rejected or deferred.
    assert coord(repo, "request-changes", "A", "--note", "n").code == 3
    assert coord(repo, "reject", "A", "--note", "n", "--discard").code == 3
    assert coord(repo, "defer", "A").code == 3
    assert task_doc(coord, repo, "A")["state"] == "accepted"
    assert (repo / "f.txt").read_bytes() == b"one\nline 2\nline 3\n"


def test_accept_before_the_report_is_refused(make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
    repo = make_repo({"f.txt": numbered(3)})
    root = head(repo)
    begin(coord, worker, repo, "A", "f.txt")
    set_line(repo, "f.txt", 1, "one")
    r = coord(repo, "accept", "A")
    assert r.code == 3
    assert head(repo) == root
    assert coord(repo, "accept", "no-such-task").code == 2


def test_accept_while_frozen_is_refused(make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
    repo = make_repo({"f.txt": numbered(3)})
    root = head(repo)
    begin(coord, worker, repo, "A", "f.txt")
    set_line(repo, "f.txt", 1, "one")
    done(worker, repo, "A", "A")
    ok(coord(repo, "freeze"))
    r = coord(repo, "accept", "A")
    assert r.code == 3
    assert head(repo) == root
    assert task_doc(coord, repo, "A")["state"] == "reported"
    ok(coord(repo, "thaw"))
    ok(coord(repo, "accept", "A"))
    assert blob(repo, "f.txt") == b"one\nline 2\nline 3\n"


def test_blocked_report_is_not_accepted(make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
    repo = make_repo({"f.txt": numbered(3)})
    root = head(repo)
    begin(coord, worker, repo, "A", "f.txt")
    set_line(repo, "f.txt", 1, "one")
    ok(worker(repo, "blocked", "A", "--reason", "waiting on the API"))
    r = coord(repo, "accept", "A")
    assert r.code == 1
    assert "not-done" in finding_codes(coord, repo, "A")
    assert head(repo) == root


# ---- --recheck ----------------------------------------------------------------------------

def test_recheck_fails_when_the_check_needs_the_shared_tree(make_repo: MakeRepo, coord: Cli,
                                                           worker: Cli) -> None:
    # The worker's checks in the shared tree ([checks] where = "tree"), as before isolation.
    repo = make_repo({"f.txt": numbered(3), "coord.toml": '[checks]\nwhere = "tree"\n'})
    root = head(repo)
    begin(coord, worker, repo, "A", "f.txt", checks=("test -f untracked.txt",))
    write(repo, "untracked.txt", "only in the shared tree\n")
    set_line(repo, "f.txt", 1, "one")
    rep = done(worker, repo, "A", "A")
    assert rep["report"]["checks_passed"] == 1  # green amid the shared tree's files
    r = coord(repo, "accept", "A", "--recheck")
    assert r.code == 1
    assert "untracked.txt" in error_message(r)
    assert head(repo) == root
    assert git(repo, "diff", "--cached", "--name-only") == ""
    assert len(git(repo, "worktree", "list", "--porcelain").split("\n\n")) == 1 or \
        git(repo, "worktree", "list").count("\n") == 1
    assert task_doc(coord, repo, "A")["state"] == "reported"
    # Without the recheck the worker's green run is taken as it is.
    ok(coord(repo, "accept", "A", "--no-recheck"))
    assert blob(repo, "f.txt") == b"one\nline 2\nline 3\n"


def test_recheck_runs_on_head_plus_exactly_the_task(make_repo: MakeRepo, coord: Cli,
                                                   worker: Cli) -> None:
    base = numbered(10)
    repo = make_repo({"f.txt": base})
    check = "grep -qx 'two by A' f.txt && ! grep -q 'by B' f.txt"
    begin(coord, worker, repo, "A", "f.txt:1-5", checks=(check,))
    begin(coord, worker, repo, "B", "f.txt:6-10")
    set_line(repo, "f.txt", 2, "two by A")
    set_line(repo, "f.txt", 9, "nine by B")
    done(worker, repo, "A", "A", "--no-run-checks")  # the shared tree would fail it
    ok(coord(repo, "accept", "A", "--recheck"))
    assert blob(repo, "f.txt") == lines_with(base, l2="two by A")
    assert git(repo, "worktree", "list").count("\n") == 1


def test_recheck_from_coord_toml(make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
    repo = make_repo({"f.txt": numbered(3),
                      "coord.toml": '[accept]\nrecheck = true\n[checks]\nwhere = "tree"\n'})
    root = head(repo)
    begin(coord, worker, repo, "A", "f.txt", checks=("test -f untracked.txt",))
    write(repo, "untracked.txt", "x\n")
    set_line(repo, "f.txt", 1, "one")
    done(worker, repo, "A", "A")
    assert coord(repo, "accept", "A").code == 1
    assert head(repo) == root


# ---- request-changes, reject, defer ----------------------------------------------------------

def test_request_changes_then_revision_two_is_accepted(make_repo: MakeRepo, coord: Cli,
                                                      worker: Cli) -> None:
    repo = make_repo({"f.txt": numbered(4)})
    root = head(repo)
    begin(coord, worker, repo, "A", "f.txt")
    set_line(repo, "f.txt", 2, "two (draft)")
    done(worker, repo, "A", "draft")
    doc = ok(coord(repo, "request-changes", "A", "--note", "spell it TWO"))
    assert doc["task"]["state"] == "changes_requested"
    assert task_doc(coord, repo, "A")["state"] == "changes_requested"
    assert coord(repo, "accept", "A").code == 3
    assert head(repo) == root
    again = ok(worker(repo, "start", "A"))
    assert "spell it TWO" in [n["text"] for n in again["notes"]]
    set_line(repo, "f.txt", 2, "TWO")
    rep = done(worker, repo, "A", "final")
    assert rep["report"]["revision"] == 2
    a = ok(coord(repo, "accept", "A"))
    assert a.get("revision", 2) == 2
    assert tree_of(repo) == {"f.txt": ("100644", b"line 1\nTWO\nline 3\nline 4\n")}
    assert commit_message(repo) == b"final\n\nCoord-Task: A\n"
    assert parents(repo) == [root]


def test_reject_discard_removes_exactly_the_task_changes(make_repo: MakeRepo, coord: Cli,
                                                        worker: Cli) -> None:
    base = numbered(10)
    repo = make_repo({"f.txt": base, "gone.txt": "restored\n", "run.sh": "#!/bin/sh\n",
                      "keep.txt": "keep\n"})
    root = head(repo)
    begin(coord, worker, repo, "A", "f.txt:1-5", "gone.txt", "run.sh", "a-new.txt")
    begin(coord, worker, repo, "B", "f.txt:6-10")
    rows = base.split("\n")
    rows[8] = "nine by B"
    del rows[4]  # A deletes line 5
    rows[1] = "two by A"
    rows[3:3] = ["inserted by A"]
    write(repo, "f.txt", "\n".join(rows))
    (repo / "gone.txt").unlink()
    os.chmod(repo / "run.sh", 0o755)
    write(repo, "a-new.txt", "new from A\n")
    write(repo, "keep.txt", "keep, edited by nobody\n")
    done(worker, repo, "A", "A")
    before = work_files(repo)
    doc = ok(coord(repo, "reject", "A", "--note", "wrong approach", "--discard"))
    assert doc["task"]["state"] == "rejected"
    assert sorted(doc["discarded"]) == ["a-new.txt", "f.txt", "gone.txt", "run.sh"]
    after = work_files(repo)
    expected = dict(before)
    expected["f.txt"] = ("100644", lines_with(base, l9="nine by B"))
    expected["gone.txt"] = ("100644", b"restored\n")
    expected["run.sh"] = ("100644", b"#!/bin/sh\n")
    del expected["a-new.txt"]
    assert after == expected
    assert head(repo) == root
    assert porcelain(repo) == " M f.txt\n M keep.txt\n"
    # B's edit is still B's and still commits.
    done(worker, repo, "B", "B")
    ok(coord(repo, "accept", "B"))
    assert blob(repo, "f.txt") == lines_with(base, l9="nine by B")


def test_reject_without_discard_leaves_the_tree(make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
    repo = make_repo({"f.txt": numbered(4)})
    root = head(repo)
    begin(coord, worker, repo, "A", "f.txt", "new.txt")
    set_line(repo, "f.txt", 3, "three")
    write(repo, "new.txt", "new\n")
    done(worker, repo, "A", "A")
    before = work_files(repo)
    doc = ok(coord(repo, "reject", "A", "--note", "not now"))
    assert doc["task"]["state"] == "rejected" and doc["discarded"] == []
    assert work_files(repo) == before
    assert head(repo) == root
    assert coord(repo, "accept", "A").code == 3
    # Its grants are released: the edits are now unowned.
    st = ok(coord(repo, "status"))
    assert sorted(u["path"] for u in st["unowned"]) == ["f.txt", "new.txt"]


def test_defer_keeps_edits_and_moves_to_next_batch(make_repo: MakeRepo, coord: Cli,
                                                  worker: Cli) -> None:
    repo = make_repo({"f.txt": numbered(4)})
    root = head(repo)
    begin(coord, worker, repo, "A", "f.txt")
    batch = task_doc(coord, repo, "A")["batch"]
    set_line(repo, "f.txt", 3, "three")
    done(worker, repo, "A", "A")
    before = work_files(repo)
    doc = ok(coord(repo, "defer", "A"))
    assert doc["task"]["state"] == "deferred"
    assert doc["task"]["batch"] == batch + 1
    t = task_doc(coord, repo, "A")
    assert t["state"] == "deferred" and t["batch"] == batch + 1
    assert t["grants"] == ["f.txt"]
    assert work_files(repo) == before
    assert head(repo) == root
    # Its grant is still held: nobody else may take the file.
    r = coord(repo, "assign", "B", "--title", "t", "--expect", "e", "--write", "f.txt")
    assert r.code == 3


# ---- more shapes -----------------------------------------------------------------------------

def test_accept_on_an_unborn_branch_makes_the_root_commit(make_repo: MakeRepo, coord: Cli,
                                                         worker: Cli) -> None:
    repo = make_repo(commit=False)
    begin(coord, worker, repo, "A", "src/**")
    begin(coord, worker, repo, "B", "docs/**")
    write(repo, "src/main.py", "print('hi')\n")
    write(repo, "docs/readme.md", "# docs\n")
    done(worker, repo, "A", "first commit")
    a = ok(coord(repo, "accept", "A"))
    assert parents(repo, a["commit"]) == []
    assert tree_of(repo) == {"src/main.py": ("100644", b"print('hi')\n")}
    assert porcelain(repo) == "?? docs/readme.md\n"


def test_accept_from_a_subdirectory(make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
    repo = make_repo({"sub/dir/f.txt": numbered(3), "top.txt": "t\n"})
    begin(coord, worker, repo, "A", "sub/dir/f.txt:1-3", "top.txt")
    set_line(repo, "sub/dir/f.txt", 3, "three")
    write(repo, "top.txt", "top\n")
    done(worker, repo / "sub", "A", "A")
    a = ok(coord(repo / "sub" / "dir", "accept", "A"))
    assert a["paths"] == ["sub/dir/f.txt", "top.txt"]
    assert tree_of(repo) == {"sub/dir/f.txt": ("100644", b"line 1\nline 2\nthree\n"),
                             "top.txt": ("100644", b"top\n")}


def test_files_without_trailing_newline_split_between_ranges(make_repo: MakeRepo, coord: Cli,
                                                             worker: Cli) -> None:
    base = numbered(8).rstrip("\n")  # "line 8" has no newline
    repo = make_repo({"f.txt": base})
    begin(coord, worker, repo, "A", "f.txt:1-4")
    begin(coord, worker, repo, "B", "f.txt:5-8")
    write(repo, "f.txt", base.replace("line 2", "two").replace("line 8", "eight\nnine"))
    done(worker, repo, "A", "A")
    done(worker, repo, "B", "B")
    ok(coord(repo, "accept", "B"))
    assert blob(repo, "f.txt") == base.replace("line 8", "eight\nnine").encode()
    ok(coord(repo, "accept", "A"))
    assert blob(repo, "f.txt") == base.replace("line 2", "two").replace("line 8", "eight\nnine").encode()
    assert porcelain(repo) == ""


def test_insertions_at_top_and_bottom_of_the_file(make_repo: MakeRepo, coord: Cli,
                                                  worker: Cli) -> None:
    base = numbered(8)
    repo = make_repo({"f.txt": base})
    begin(coord, worker, repo, "A", "f.txt:1-3")
    begin(coord, worker, repo, "B", "f.txt:6-8")
    write(repo, "f.txt", "header\n" + base + "footer\n")
    done(worker, repo, "A", "A")
    done(worker, repo, "B", "B")
    ok(coord(repo, "accept", "B"))
    assert blob(repo, "f.txt") == (base + "footer\n").encode()
    ok(coord(repo, "accept", "A"))
    assert blob(repo, "f.txt") == ("header\n" + base + "footer\n").encode()


def test_commit_trailer_joins_an_existing_trailer_block(make_repo: MakeRepo, coord: Cli,
                                                        worker: Cli) -> None:
    repo = make_repo({"f.txt": numbered(3)})
    begin(coord, worker, repo, "A", "f.txt")
    set_line(repo, "f.txt", 1, "one")
    done(worker, repo, "A", "Subject\n\nBody.\n\nSigned-off-by: W <w@example.com>")
    ok(coord(repo, "accept", "A"))
    trailers = git(repo, "interpret-trailers", "--parse", input=commit_message(repo))
    assert trailers == "Signed-off-by: W <w@example.com>\nCoord-Task: A\n"


def test_coord_task_trailer_is_a_git_trailer(make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
    repo = make_repo({"f.txt": numbered(3)})
    begin(coord, worker, repo, "task-7.b", "f.txt")
    set_line(repo, "f.txt", 1, "one")
    done(worker, repo, "task-7.b", "Subject only")
    ok(coord(repo, "accept", "task-7.b"))
    assert git(repo, "log", "-1", "--format=%(trailers:key=Coord-Task,valueonly)").strip() == "task-7.b"
    assert git(repo, "log", "-1", "--format=%s").strip() == "Subject only"


def test_tab_in_a_file_name_under_a_glob_grant(make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
    repo = make_repo({"keep.txt": "k\n"})
    begin(coord, worker, repo, "A", "pkg/**")
    write(repo, "pkg/a\tb.txt", "tab\n")
    done(worker, repo, "A", "A")
    ok(coord(repo, "accept", "A"))
    assert tree_of(repo)["pkg/a\tb.txt"] == ("100644", b"tab\n")


def test_non_utf8_file_name_under_a_glob_grant(make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
    repo = make_repo({"keep.txt": "k\n"})
    begin(coord, worker, repo, "A", "pkg/**")
    (repo / "pkg").mkdir()
    (repo / os.fsdecode(b"pkg/caf\xe9.txt")).write_bytes(b"latin-1 name\n")
    done(worker, repo, "A", "A")
    ok(coord(repo, "accept", "A"))
    names = git_bytes(repo, "ls-tree", "-r", "-z", "--name-only", "HEAD").split(b"\0")
    assert b"pkg/caf\xe9.txt" in names


def test_stray_non_utf8_file_name_does_not_block_other_tasks(make_repo: MakeRepo, coord: Cli,
                                                            worker: Cli) -> None:
    repo = make_repo({"f.txt": numbered(3)})
    begin(coord, worker, repo, "A", "f.txt")
    set_line(repo, "f.txt", 1, "one")
    (repo / os.fsdecode(b"stray-\xe9.txt")).write_bytes(b"nobody's\n")
    done(worker, repo, "A", "A")
    ok(coord(repo, "accept", "A"))
    assert blob(repo, "f.txt") == b"one\nline 2\nline 3\n"
    assert (repo / os.fsdecode(b"stray-\xe9.txt")).read_bytes() == b"nobody's\n"


# ---- concurrent accepts ------------------------------------------------------------------

def _popen_accept(repo: Path, tid: str, **env: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([str(BIN / "coord"), "accept", tid, "--json"], cwd=repo,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, **env})


@pytest.mark.slow
def test_concurrent_accepts_of_tasks_in_one_file(make_repo: MakeRepo, coord: Cli,
                                                 worker: Cli) -> None:
    base = numbered(40)
    repo = make_repo({"f.txt": base})
    root = head(repo)
    rows = base.split("\n")
    ids = ["T1", "T2", "T3", "T4"]
    for i, tid in enumerate(ids):
        lo = 10 * i + 1
        begin(coord, worker, repo, tid, f"f.txt:{lo}-{lo + 9}")
    # Each task edits one line and inserts two: every commit shifts the later ranges.
    for i in reversed(range(4)):
        at = 10 * i + 4
        rows[at - 1] = f"edited by T{i + 1}"
        rows[at:at] = [f"T{i + 1} new a", f"T{i + 1} new b"]
    final = "\n".join(rows).encode()
    write(repo, "f.txt", final)
    for tid in ids:
        done(worker, repo, tid, f"commit {tid}")
    procs = {tid: _popen_accept(repo, tid) for tid in ids}
    results = {tid: p.communicate(timeout=120) for tid, p in procs.items()}
    codes = {tid: p.returncode for tid, p in procs.items()}
    # A spurious index-dirty refusal can happen in the window between another accept's ref
    # update and its index reset (see test_accept_racing_another_accept_is_not_index_dirty);
    # such a refusal commits nothing, so it is retried here and the content still checked.
    for tid, code in codes.items():
        if code == 1 and b"index-dirty" in results[tid][1]:
            codes[tid] = coord(repo, "accept", tid).code
    assert codes == {tid: 0 for tid in ids}, {t: e.decode() for t, (_o, e) in results.items()}
    chain = git(repo, "rev-list", "--first-parent", f"{root}..HEAD").split()
    assert len(chain) == 4
    assert blob(repo, "f.txt") == final
    assert porcelain(repo) == ""
    # Each commit adds exactly its own task's three changed lines.
    for c in chain:
        task = git(repo, "log", "-1", "--format=%(trailers:key=Coord-Task,valueonly)", c).strip()
        d = git(repo, "diff", "-U0", "--no-color", f"{c}^", c, "--", "f.txt")
        added = sorted(ln[1:] for ln in d.split("\n") if ln.startswith("+") and not ln.startswith("+++"))
        assert added == sorted([f"edited by {task}", f"{task} new a", f"{task} new b"]), c


def test_concurrent_double_accept_commits_once(make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
    repo = make_repo({"f.txt": numbered(3)})
    root = head(repo)
    begin(coord, worker, repo, "A", "f.txt")
    set_line(repo, "f.txt", 1, "one")
    done(worker, repo, "A", "A")
    procs = [_popen_accept(repo, "A") for _ in range(3)]
    for p in procs:
        p.communicate(timeout=120)
    codes = sorted(p.returncode for p in procs)
    assert codes[0] == 0 and codes.count(0) == 1, codes
    assert all(c in (1, 3) for c in codes[1:]), codes
    assert git(repo, "rev-list", "--count", f"{root}..HEAD").strip() == "1"
    assert blob(repo, "f.txt") == b"one\nline 2\nline 3\n"


# The gates of the race below, run by git as the clean filter of slow.txt (so inside a
# snapshot) and as A's reference-transaction hook. Each side waits for a state of the
# other, never for a time; the deadline only bounds a broken run.
RACE_GATE = r"""
import os, sys, time
mode, gate = sys.argv[1], sys.argv[2]
role = os.environ.get("RACE_ROLE")

def b_pid():
    try:
        return int(open(os.path.join(gate, "b.pid")).read())
    except (OSError, ValueError):
        return None

def b_waits_for(*locks):
    # B has one of these lock files of the coordinator open: while A holds them (both in
    # the hook; the commit lock in its snapshot), B is waiting for one.
    pid, coord = b_pid(), os.environ["RACE_COORD_DIR"]
    paths = {os.path.join(coord, name) for name in locks}
    try:
        return pid is not None and any(os.readlink(f"/proc/{pid}/fd/{fd}") in paths
                                       for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False

def b_ended():
    pid = b_pid()
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] == "Z"
    except OSError:
        return pid is not None

def until(cond):
    deadline = time.monotonic() + 60
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.005)

def seen(name):
    return os.path.exists(os.path.join(gate, name))

def mark(name):
    open(os.path.join(gate, name), "w").close()

if mode == "filter":
    data = sys.stdin.buffer.read()
    if role == "A":  # A snapshots once B is under way: waiting for the lock, or snapshotting
        mark("a-snapshots")
        until(lambda: b_waits_for("commit") or seen("b-snapshots"))
    elif role == "B":  # B's snapshot ends only after A has moved HEAD
        mark("b-snapshots")
        until(lambda: seen("a-moved-head"))
    sys.stdout.buffer.write(data)
else:  # A holds its window between HEAD's move and its index reset open
    refs = sys.stdin.read()
    if (sys.argv[3] == "committed" and role == "A" and not seen("a-moved-head")
            and ("refs/heads/main" in refs or "HEAD" in refs)):
        mark("a-moved-head")
        until(lambda: b_waits_for("commit", "lock") or b_ended())
"""


@pytest.mark.slow
def test_accept_racing_another_accept_is_not_index_dirty(make_repo: MakeRepo, coord: Cli,
                                                         worker: Cli, tmp_path: Path) -> None:
    """B's accept runs while A's is between its `update-ref HEAD` and its index reset.

    A clean filter on slow.txt holds A's snapshot until B is under way (waiting for the
    commit lock; without that lock, in its own snapshot) and holds B's snapshot until A has
    moved HEAD; a reference-transaction hook then holds A in the window until B waits for
    a lock A holds, or has ended. Without the commit lock B validates inside the window,
    sees A's paths as staged and refuses with index-dirty."""
    repo = make_repo({"a.txt": "a\n", "b.txt": "b\n", "slow.txt": "s\n"})
    begin(coord, worker, repo, "A", "a.txt")
    begin(coord, worker, repo, "B", "b.txt")
    write(repo, "a.txt", "a by A\n")
    write(repo, "b.txt", "b by B\n")
    write(repo, "slow.txt", "s, unowned edit\n")
    # Dated back, as on a slow machine: not "racily clean" in the snapshot's kept index, so
    # only the filter set below (which the snapshot must notice) makes git read it again.
    then = time.time() - 10
    os.utime(repo / "slow.txt", (then, then))
    done(worker, repo, "A", "A")
    done(worker, repo, "B", "B")
    gate = tmp_path / "gate"
    gate.mkdir()
    script = tmp_path / "race_gate.py"
    script.write_text(RACE_GATE)
    hook = repo / ".git" / "hooks" / "reference-transaction"
    hook.write_text(f"#!/bin/sh\nexec '{sys.executable}' '{script}' hook '{gate}' \"$1\"\n")
    hook.chmod(0o755)
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "attributes").write_text("slow.txt filter=slow\n")
    git(repo, "config", "filter.slow.clean", f"'{sys.executable}' '{script}' filter '{gate}'")
    coord_dir = str((repo / ".git" / "coord").resolve())
    pa = _popen_accept(repo, "A", RACE_ROLE="A", RACE_COORD_DIR=coord_dir)
    wait_until((gate / "a-snapshots").exists, what="A's snapshot")  # A goes first
    pb = _popen_accept(repo, "B", RACE_ROLE="B", RACE_COORD_DIR=coord_dir)
    (gate / "b.pid").write_text(str(pb.pid))
    out_a, err_a = pa.communicate(timeout=120)
    out_b, err_b = pb.communicate(timeout=120)
    assert (gate / "a-moved-head").exists()
    assert pa.returncode == 0, err_a.decode()
    assert pb.returncode == 0, err_b.decode()
    assert tree_of(repo) == {"a.txt": ("100644", b"a by A\n"), "b.txt": ("100644", b"b by B\n"),
                             "slow.txt": ("100644", b"s\n")}


def test_head_moved_by_a_commit_shifting_the_task_lines(make_repo: MakeRepo, coord: Cli,
                                                       worker: Cli) -> None:
    """Someone commits only their own (unowned) insertion at the top of the same file."""
    base = numbered(10)
    repo = make_repo({"f.txt": base})
    begin(coord, worker, repo, "A", "f.txt:5-8")
    write(repo, "f.txt", "top by someone\n" + base.replace("line 6\n", "six by A\n"))
    done(worker, repo, "A", "A")
    theirs_blob = git(repo, "hash-object", "-w", "--stdin",
                      input=("top by someone\n" + base).encode()).strip()
    git(repo, "update-index", "--cacheinfo", f"100644,{theirs_blob},f.txt")
    git(repo, "commit", "-q", "-m", "someone's top line")
    theirs = head(repo)
    a = ok(coord(repo, "accept", "A"))
    assert parents(repo, a["commit"]) == [theirs]
    assert blob(repo, "f.txt") == ("top by someone\n" + base.replace("line 6\n", "six by A\n")).encode()
    assert porcelain(repo) == ""


def test_reject_discard_restores_whole_file_changes(make_repo: MakeRepo, coord: Cli,
                                                    worker: Cli) -> None:
    repo = make_repo({"pkg/old.txt": "moving\n", "pkg/img.bin": b"\0\1\2", "pkg/run.sh": "echo\n",
                      "pkg/sub/deep.txt": "deep\n", "other/keep.txt": "keep\n"})
    before = work_files(repo)
    begin(coord, worker, repo, "A", "pkg/**")
    begin(coord, worker, repo, "B", "other/**")
    os.rename(repo / "pkg/old.txt", repo / "pkg/new.txt")
    write(repo, "pkg/img.bin", b"\0\3\4\5")
    os.chmod(repo / "pkg/run.sh", 0o755)
    os.symlink("new.txt", repo / "pkg/link")
    (repo / "pkg/sub/deep.txt").unlink()
    (repo / "pkg/sub").rmdir()
    write(repo, "pkg/added/dir/file.txt", "added\n")
    write(repo, "other/keep.txt", "keep, edited by B\n")
    done(worker, repo, "A", "A")
    ok(coord(repo, "reject", "A", "--note", "no", "--discard"))
    expected = dict(before)
    expected["other/keep.txt"] = ("100644", b"keep, edited by B\n")
    assert work_files(repo) == expected
    assert not (repo / "pkg/added").exists()
    assert porcelain(repo) == " M other/keep.txt\n"


def test_reject_discard_with_autocrlf_keeps_line_endings(make_repo: MakeRepo, coord: Cli,
                                                        worker: Cli) -> None:
    repo = make_repo({"t.txt": "a\nb\nc\nd\ne\nf\n"})
    git(repo, "config", "core.autocrlf", "true")
    git(repo, "rm", "-q", "--cached", "t.txt")
    git(repo, "checkout", "-q", "HEAD", "--", "t.txt")  # rewritten with CRLF
    assert (repo / "t.txt").read_bytes() == b"a\r\nb\r\nc\r\nd\r\ne\r\nf\r\n"
    begin(coord, worker, repo, "A", "t.txt:1-3")
    begin(coord, worker, repo, "B", "t.txt:4-6")
    write(repo, "t.txt", b"a\r\nB by A\r\nc\r\nd\r\nE by B\r\nf\r\n")
    done(worker, repo, "A", "A")
    ok(coord(repo, "reject", "A", "--note", "no", "--discard"))
    assert (repo / "t.txt").read_bytes() == b"a\r\nb\r\nc\r\nd\r\nE by B\r\nf\r\n"
    done(worker, repo, "B", "B")
    ok(coord(repo, "accept", "B"))
    assert blob(repo, "t.txt") == b"a\nb\nc\nd\nE by B\nf\n"
    assert porcelain(repo) == ""


def test_reject_discard_refuses_while_frozen(make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
    repo = make_repo({"f.txt": numbered(3)})
    begin(coord, worker, repo, "A", "f.txt")
    set_line(repo, "f.txt", 1, "one")
    done(worker, repo, "A", "A")
    ok(coord(repo, "freeze"))
    before = work_files(repo)
    assert coord(repo, "reject", "A", "--note", "no", "--discard").code == 3
    assert work_files(repo) == before
    assert task_doc(coord, repo, "A")["state"] == "reported"


def test_only_the_user_s_pre_commit_runs_on_accept_and_never_in_the_shared_tree(
        make_repo: MakeRepo, coord: Cli, worker: Cli, tmp_path: Path) -> None:
    repo = make_repo({"f.txt": numbered(3)})
    ran = tmp_path / "hook-ran"
    for name in ("commit-msg", "prepare-commit-msg", "post-commit"):
        hook = repo / ".git" / "hooks" / name
        hook.write_text(f"#!/bin/sh\necho {name} >> '{ran}'\nexit 1\n")
        hook.chmod(0o755)
    # pre-commit sees the commit's exact content staged, and refuses it once.
    pre = repo / ".git" / "hooks" / "pre-commit"
    pre.write_text(f"#!/bin/sh\n{{ pwd; git diff --cached --name-only; cat f.txt; }} >> '{ran}'\n"
                   f"[ -e '{tmp_path}/pass' ] || {{ echo 'lint: f.txt is ugly'; exit 1; }}\n")
    pre.chmod(0o755)
    begin(coord, worker, repo, "A", "f.txt")
    set_line(repo, "f.txt", 1, "one")
    done(worker, repo, "A", "Subject")
    head0 = git(repo, "rev-parse", "HEAD")
    r = coord(repo, "accept", "A")
    assert r.code == 1 and "pre-commit" in r.doc["error"]["message"], r.stdout
    assert git(repo, "rev-parse", "HEAD") == head0
    (tmp_path / "pass").write_text("")
    ok(coord(repo, "accept", "A"))
    log = ran.read_text().splitlines()
    where = log[0]
    # a scratch checkout: never the shared tree (a folder of the state, inside .git, is fine)
    assert where != str(repo) and (not where.startswith(str(repo) + "/")
                                   or where.startswith(str(repo / ".git") + "/"))
    assert log[1:3] == ["f.txt", "one"]
    assert not any(n in ran.read_text() for n in ("commit-msg", "post-commit"))
    assert commit_message(repo) == b"Subject\n\nCoord-Task: A\n"


def test_non_ascii_commit_message_with_a_legacy_commit_encoding(make_repo: MakeRepo, coord: Cli,
                                                                worker: Cli) -> None:
    repo = make_repo({"f.txt": numbered(3)})
    git(repo, "config", "i18n.commitEncoding", "ISO-8859-1")
    begin(coord, worker, repo, "A", "f.txt")
    set_line(repo, "f.txt", 1, "one")
    done(worker, repo, "A", "Résumé ✓")
    ok(coord(repo, "accept", "A"))
    assert git(repo, "log", "-1", "--format=%s", "--encoding=UTF-8").strip() == "Résumé ✓"


@pytest.mark.parametrize("attributes", [
    pytest.param("f.txt -diff"),
    "f.txt diff=custom",
])
def test_diff_attributes_change_nothing(make_repo: MakeRepo, coord: Cli, worker: Cli,
                                        attributes: str) -> None:
    base = numbered(10)
    repo = make_repo({"f.txt": base})
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "attributes").write_text(attributes + "\n")
    git(repo, "config", "diff.custom.textconv", "tr a-z A-Z <")
    git(repo, "config", "diff.custom.command", "/bin/false")
    begin(coord, worker, repo, "A", "f.txt:1-5")
    begin(coord, worker, repo, "B", "f.txt:6-10")
    set_line(repo, "f.txt", 2, "two by A")
    set_line(repo, "f.txt", 9, "nine by B")
    done(worker, repo, "A", "A")
    done(worker, repo, "B", "B")
    ok(coord(repo, "accept", "A"))
    assert blob(repo, "f.txt") == lines_with(base, l2="two by A")
    ok(coord(repo, "accept", "B"))
    assert blob(repo, "f.txt") == lines_with(base, l2="two by A", l9="nine by B")


def test_index_lock_held_too_long_leaves_a_consistent_state(make_repo: MakeRepo, coord: Cli,
                                                            worker: Cli) -> None:
    repo = make_repo({"f.txt": numbered(4)})
    root = head(repo)
    begin(coord, worker, repo, "A", "f.txt")
    set_line(repo, "f.txt", 4, "four")
    done(worker, repo, "A", "A")
    lock = repo / ".git" / "index.lock"
    lock.write_bytes(b"")
    r = coord(repo, "accept", "A", env={"COORD_INDEX_LOCK_WAIT": "0.2"})
    lock.unlink()
    # The commit landed: the state records it, and the user is told to refresh the index.
    assert r.code == 0, r.stdout + r.stderr
    assert head(repo) != root
    assert "index.lock" in r.stderr and "git reset -q -- f.txt" in r.stderr
    t = task_doc(coord, repo, "A")
    assert (t["state"], t["commit"]) == ("accepted", head(repo))


def test_accept_refuses_a_task_sent_back_while_it_was_being_accepted(make_repo, coord, worker) -> None:
    repo = make_repo({"a.txt": "1\n"})
    # The recheck itself sends the task back, deterministically inside accept's window.
    check = f"{BIN / 'coord'} request-changes A --note again --repo {repo}"
    assign_and_start(coord, worker, repo, "A", "a.txt", lambda: write(repo, "a.txt", "2\n"), check=check)
    assert worker(repo, "done", "A", "--no-run-checks").code == 0
    head = git(repo, "rev-parse", "HEAD")
    r = coord(repo, "accept", "A", "--recheck")
    assert r.code == 3 and "changed while it was being accepted" in r.doc["error"]["message"]
    assert git(repo, "rev-parse", "HEAD") == head
    tasks = {t["id"]: t for t in coord(repo, "status").doc["tasks"]}
    assert tasks["A"]["state"] == "changes_requested"
