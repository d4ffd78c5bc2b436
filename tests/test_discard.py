"""coord discard: unowned changes leave the tree exactly, owned ones never, and come back."""

from __future__ import annotations

from pathlib import Path

import pytest

from testing.repo import git, git_bytes, numbered, set_line, write


def _assign(coord, repo: Path, tid: str, *grants: str) -> None:
    args = [a for g in grants for a in ("--write", g)]
    r = coord(repo, "assign", tid, "--title", tid, "--expect", "e", *args)
    assert r.code == 0, r.stderr


def test_discard_removes_only_unowned_hunks_and_undo_puts_them_back(make_repo, coord,
                                                                    worker) -> None:
    repo = make_repo({"f.txt": numbered(20)})
    _assign(coord, repo, "t1", "f.txt:1-5")
    assert worker(repo, "start", "t1").code == 0
    set_line(repo, "f.txt", 3, "t1's three")       # owned by t1
    set_line(repo, "f.txt", 10, "stray ten")       # unowned
    set_line(repo, "f.txt", 18, "stray eighteen")  # unowned
    dirty = (repo / "f.txt").read_bytes()
    r = coord(repo, "discard", "f.txt")
    assert r.code == 0, r.stderr
    assert [u["lines"] for u in r.doc["discarded"]] == ["10-10", "18-18"]
    assert [(k["lines"], k["reason"]) for k in r.doc["kept"]] == [("3-3", "owned by t1")]
    expected = numbered(20).replace("line 3\n", "t1's three\n").encode()
    assert (repo / "f.txt").read_bytes() == expected
    ref = r.doc["ref"]
    assert ref.startswith("refs/hunkwise/discarded/")
    # The record: REF^..REF is exactly what went, REF:PATH the file as it was.
    assert git_bytes(repo, "show", f"{ref}:f.txt") == dirty
    patch = git(repo, "diff", f"{ref}^", ref)
    assert "+stray ten" in patch and "+stray eighteen" in patch and "three" not in patch
    # t1 keeps editing meanwhile; undo carries the discarded lines across that edit.
    set_line(repo, "f.txt", 4, "t1's four")
    u = coord(repo, "discard", "--undo", ref)
    assert u.code == 0, u.stderr
    assert (repo / "f.txt").read_bytes() == dirty.replace(b"line 4\n", b"t1's four\n")
    assert git(repo, "diff", "--cached", "--name-only") == ""


def test_discard_of_a_line_range_only(make_repo, coord) -> None:
    repo = make_repo({"f.txt": numbered(20)})
    set_line(repo, "f.txt", 2, "stray two")
    set_line(repo, "f.txt", 12, "stray twelve")
    r = coord(repo, "discard", "f.txt:10-15")
    assert r.code == 0, r.stderr
    assert [u["lines"] for u in r.doc["discarded"]] == ["12-12"]
    assert (repo / "f.txt").read_bytes() == numbered(20).replace("line 2\n", "stray two\n").encode()
    # A hunk that reaches outside the range stays, and says so.
    (repo / "f.txt").write_bytes(numbered(20).replace("line 5\nline 6\n", "five\nsix\n").encode())
    r = coord(repo, "discard", "f.txt:6-9")
    assert r.code == 0 and r.doc["discarded"] == []
    assert r.doc["kept"][0]["lines"] == "5-6" and "outside" in r.doc["kept"][0]["reason"]
    assert b"five\nsix\n" in (repo / "f.txt").read_bytes()


def test_discard_never_touches_conflicts_or_files_a_glob_holds(make_repo, coord) -> None:
    repo = make_repo({"f.txt": numbered(10), "g.txt": "g\n"})
    _assign(coord, repo, "t1", "f.txt:1-5", "g.txt")
    (repo / "f.txt").write_bytes(numbered(10).replace("line 5\nline 6\n", "5!\n6!\n").encode())
    write(repo, "g.txt", "g changed\n")
    before = {p: (repo / p).read_bytes() for p in ("f.txt", "g.txt")}
    r = coord(repo, "discard", "f.txt")
    assert r.code == 0 and r.doc["discarded"] == [] and r.doc["ref"] is None
    assert "conflict" in r.doc["kept"][0]["reason"]
    r = coord(repo, "discard", "g.txt")
    assert r.code == 0 and r.doc["kept"] == [{"path": "g.txt", "lines": "1-1",
                                              "reason": "owned by t1"}]
    assert {p: (repo / p).read_bytes() for p in before} == before


def test_discard_of_whole_files_new_and_deleted(make_repo, coord) -> None:
    repo = make_repo({"keep.txt": "k\n", "gone.txt": "bye\n"})
    write(repo, "junk/new.txt", "scratch\n")
    (repo / "gone.txt").unlink()
    r = coord(repo, "discard", "junk")
    assert r.code == 0, r.stderr
    assert r.doc["paths"] == ["junk/new.txt"] and not (repo / "junk").exists()
    r2 = coord(repo, "discard", "gone.txt")
    assert r2.code == 0 and (repo / "gone.txt").read_bytes() == b"bye\n"
    assert git(repo, "status", "--porcelain") == ""
    # A whole-file change is not split by a line range.
    write(repo, "keep.txt", b"\x00binary now")
    r3 = coord(repo, "discard", "keep.txt:1-1")
    assert r3.code == 0 and r3.doc["discarded"] == [] and "whole-file" in r3.doc["kept"][0]["reason"]
    # Undo in any order brings each back.
    assert coord(repo, "discard", "--undo", r.doc["ref"]).code == 0
    assert (repo / "junk/new.txt").read_bytes() == b"scratch\n"
    assert coord(repo, "discard", "--undo", r2.doc["ref"]).code == 0
    assert not (repo / "gone.txt").exists()


def test_discard_is_refused_while_frozen(make_repo, coord) -> None:
    repo = make_repo({"f.txt": numbered(5)})
    set_line(repo, "f.txt", 2, "stray")
    assert coord(repo, "freeze").code == 0
    r = coord(repo, "discard", "f.txt")
    assert r.code == 3 and "freeze" in r.doc["error"]["message"]
    assert b"stray" in (repo / "f.txt").read_bytes()
    assert git(repo, "for-each-ref", "refs/hunkwise/discarded/") == ""


def test_discard_writes_nothing_when_the_file_moved_meanwhile(make_repo, coord,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from hunkwise.coordinator import discard as core

    repo = make_repo({"f.txt": numbered(5)})
    set_line(repo, "f.txt", 2, "stray")
    real = core.view

    def view_then_edit(*a, **k):  # a worker writes right after the tree was read
        tv = real(*a, **k)
        set_line(repo, "f.txt", 4, "a worker's four")
        return tv

    monkeypatch.setattr(core, "view", view_then_edit)
    r = coord(repo, "discard", "f.txt")
    assert r.code == 3 and "retry" in r.doc["error"]["message"]
    assert (repo / "f.txt").read_bytes() == numbered(5).replace("line 2", "stray").replace(
        "line 4", "a worker's four").encode()
    assert git(repo, "for-each-ref", "refs/hunkwise/discarded/") == ""


def test_undo_refuses_where_the_same_lines_changed_since(make_repo, coord) -> None:
    repo = make_repo({"f.txt": numbered(5)})
    set_line(repo, "f.txt", 2, "stray")
    ref = coord(repo, "discard", "f.txt").doc["ref"]
    set_line(repo, "f.txt", 2, "someone else's two")
    r = coord(repo, "discard", "--undo", ref)
    assert r.code == 3 and "lines 2-2" in r.doc["error"]["message"]
    assert b"someone else's two" in (repo / "f.txt").read_bytes()
    assert coord(repo, "discard", "--undo", "refs/heads/main").code == 2
    assert coord(repo, "discard").code == 2


def test_discard_through_the_cli_in_words(make_repo, coord) -> None:
    repo = make_repo({"f.txt": numbered(5)})
    set_line(repo, "f.txt", 2, "stray")
    r = coord(repo, "discard", "f.txt", json_out=False, process=True)
    assert r.code == 0, r.stderr
    assert "discarded f.txt lines 2-2" in r.stdout
    assert "coord discard --undo refs/hunkwise/discarded/1" in r.stdout
    r = coord(repo, "discard", "f.txt", json_out=False)
    assert r.code == 0 and "nothing unowned to discard in f.txt" in r.stdout
