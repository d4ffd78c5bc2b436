"""Provenance records: what a session's tool calls wrote, read back per path."""

from __future__ import annotations

from pathlib import Path

from hunkwise.shared.state import provenance


def test_lines_written_by_two_sessions_are_told_apart(tmp_path: Path) -> None:
    provenance.note(tmp_path, "sess-a", "m.py", [b"@cache\n", b"\n", b"\n", b"def helper():\r\n"],
                    removed=[b"    pass\n"])
    provenance.note(tmp_path, "sess-b", "m.py", [b"@cache"])
    provenance.note(tmp_path, "sess-b", "other.py", [b"x = 1\n"])
    got = provenance.writers(tmp_path, "m.py")
    assert got[provenance.line_digest(b"@cache")] == {"sess-a": 1, "sess-b": 1}
    assert got[provenance.line_digest(b"def helper():")] == {"sess-a": 1}
    assert got[provenance.line_digest(b"")] == {"sess-a": 2}  # two blank lines written
    assert provenance.all_removers(tmp_path)["m.py"] == {
        provenance.line_digest(b"    pass"): {"sess-a": 1}}
    assert provenance.writers(tmp_path, "nope.py") == {}
    ev = provenance.evidence(tmp_path, {"sess-a": "A"})
    assert ev["m.py"][provenance.line_digest(b"@cache")] == ({"A": 1, "?sess-b": 1}, {})


def test_a_torn_line_loses_only_itself_and_long_records_are_split(tmp_path: Path) -> None:
    many = [f"line {i}".encode() for i in range(200)]
    provenance.note(tmp_path, "sess-a", "big.py", many)
    with open(tmp_path / provenance.FILE, "ab") as f:
        f.write(b'{"session": "sess-x", "path": "big.py", "lin')  # a crash mid-append
    raw = (tmp_path / provenance.FILE).read_bytes().split(b"\n")
    assert all(len(r) < 4096 for r in raw)
    got = provenance.writers(tmp_path, "big.py")
    assert len(got) == 200 and all(s == {"sess-a": 1} for s in got.values())


def test_no_file_means_no_evidence(tmp_path: Path) -> None:
    assert provenance.all_writers(tmp_path / "missing") == {}


def test_evidence_nets_each_task_and_reads_only_the_paths_asked(tmp_path: Path) -> None:
    """A line a task wrote and removed again is evidence of neither; sessions count as
    their tasks; a session of no active task is someone else's."""
    d = provenance.line_digest
    provenance.note(tmp_path, "sess-a", "m.py", [b"doc\n", b"kept\n"])
    provenance.note(tmp_path, "sess-a", "m.py", [], [b"doc\n", b"old\n"])
    provenance.note(tmp_path, "sess-a2", "m.py", [b"kept\n"])   # A's second session
    provenance.note(tmp_path, "sess-x", "m.py", [b"kept\n"])    # no active task's
    provenance.note(tmp_path, "sess-a", "other.py", [b"x\n"])
    ev = provenance.evidence(tmp_path, {"sess-a": "A", "sess-a2": "A"}, {"m.py"})
    assert set(ev) == {"m.py"}
    m = ev["m.py"]
    assert d(b"doc") not in m or m[d(b"doc")] == ({}, {})
    assert m[d(b"kept")] == ({"A": 2, "?sess-x": 1}, {})
    assert m[d(b"old")] == ({}, {"A": 1})


def test_a_large_record_is_pruned_to_the_sessions_still_at_work(tmp_path: Path) -> None:
    for k in range(50):
        provenance.note(tmp_path, "sess-done", "m.py", [f"old {k}\n".encode()])
    provenance.note(tmp_path, "sess-live", "m.py", [b"mine\n"], [b"gone\n"])
    assert provenance.prune(tmp_path, {"sess-live"}, at=1 << 30) == 0  # small: left alone
    assert provenance.prune(tmp_path, {"sess-live"}, at=0) == 50
    assert set(provenance.all_writers(tmp_path)["m.py"]) == {provenance.line_digest(b"mine")}
    assert provenance.all_removers(tmp_path)["m.py"] == {provenance.line_digest(b"gone"): {"sess-live": 1}}
    assert not (tmp_path / f"{provenance.FILE}.pruning").exists()


def test_accept_prunes_the_record_of_finished_sessions(make_repo, coord, worker,
                                                       monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from testing.repo import write

    repo = make_repo({"a.txt": "a\n", "b.txt": "b\n"})
    for tid in ("A", "B"):
        coord(repo, "assign", tid, "--title", tid, "--expect", "e", "--write", f"{tid.lower()}.txt")
    sa = worker(repo, "start", "A").doc["session"]
    sb = worker(repo, "start", "B").doc["session"]
    root = provenance.root_of(repo)
    provenance.note(root, sa, "a.txt", [b"A's\n"])
    provenance.note(root, sb, "b.txt", [b"B's\n"])
    monkeypatch.setattr(provenance, "PRUNE_AT", 0)
    write(repo, "a.txt", "A's\n")
    assert worker(repo, "done", "A", session=sa).code == 0
    assert coord(repo, "accept", "A").code == 0
    assert set(provenance.all_writers(root)) == {"b.txt"}  # A's session is done


def test_a_line_is_recorded_by_the_sha256_of_its_bytes_without_the_line_ending() -> None:
    """The digest is the record's format (records written before stay readable): SHA-256,
    whichever implementation computes it."""
    import hashlib

    for line in (b"", b"a1", b"a1\n", b"a1\r\n", b"  x = 1  \n", "é ∑ 字\n".encode(), b"\x00\xff"):
        want = hashlib.sha256(line.rstrip(b"\r\n")).hexdigest()
        assert provenance.line_digest(line) == want, line
