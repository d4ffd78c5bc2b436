"""The state as data: written compact by the C encoder (still atomic, still a JSON document
any tool reads), an older indented state still read, and parsed once per command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hunkwise.shared.state import store
from hunkwise.shared.state.context import open_repo

from testing.cli import Cli, ok
from testing.repo import MakeRepo, numbered, set_line


def scene(make_repo: MakeRepo, coord: Cli, worker: Cli) -> Path:
    repo = make_repo({"a.txt": numbered(9), "b.txt": numbered(9)})
    for tid, path in (("A", "a.txt"), ("B", "b.txt")):
        ok(coord(repo, "assign", tid, "--title", tid, "--expect", "e", "--write", path))
        ok(worker(repo, "start", tid))
    set_line(repo, "a.txt", 2, "A's line")
    set_line(repo, "b.txt", 2, "B's line")
    return repo


def test_the_state_is_one_compact_line_that_json_tools_read(make_repo: MakeRepo, coord: Cli,
                                                             worker: Cli) -> None:
    repo = scene(make_repo, coord, worker)
    raw = open_repo(str(repo)).lay.state_file.read_bytes()
    assert raw.count(b"\n") == 1 and raw.endswith(b"}\n")
    assert b": " not in raw and b", " not in raw.replace(b"A's line", b"")
    doc = json.loads(raw)
    assert sorted(doc["tasks"]) == ["A", "B"] and doc["tasks"]["A"]["state"] == "in_progress"


def test_an_indented_state_of_an_older_release_is_read_and_rewritten_compact(
        make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
    """What the previous release left (indented) is read by every command; the first one
    that writes the state writes it compact, and a command that changes nothing writes
    nothing."""
    repo = scene(make_repo, coord, worker)
    lay = open_repo(str(repo)).lay
    doc = json.loads(lay.state_file.read_bytes())
    lay.state_file.write_text(json.dumps(doc, indent=1, ensure_ascii=False))
    status = ok(coord(repo, "status"))
    assert {t["id"]: t["state"] for t in status["tasks"]} == {"A": "in_progress",
                                                               "B": "in_progress"}
    ok(worker(repo, "heartbeat", "A"))
    raw = lay.state_file.read_bytes()
    assert raw.count(b"\n") == 1
    after = json.loads(raw)
    assert {k: v for k, v in after["tasks"]["B"].items() if k not in ("saved", "wip_seq")} \
        == {k: v for k, v in doc["tasks"]["B"].items() if k not in ("saved", "wip_seq")}
    assert after["tasks"]["A"]["claim"]["heartbeat"] >= doc["tasks"]["A"]["claim"]["heartbeat"]
    inode = lay.state_file.stat().st_ino
    ok(coord(repo, "status"))
    assert lay.state_file.stat().st_ino == inode  # unchanged: not written again


@pytest.mark.parametrize("command", [
    ("coord", "status"), ("worker", "heartbeat", "A"), ("coord", "next"),
    ("worker", "done", "A"), ("coord", "accept", "B"),
    ("coord", "assign", "C", "--title", "C", "--expect", "e", "--write", "c.txt"),
])
def test_a_hot_command_parses_the_state_once(make_repo: MakeRepo, coord: Cli, worker: Cli,
                                             monkeypatch: pytest.MonkeyPatch,
                                             command: tuple[str, ...]) -> None:
    repo = scene(make_repo, coord, worker)
    ok(worker(repo, "done", "B"))
    if command[1] == "accept":
        ok(coord(repo, "next"))
    parses: list[bytes] = []
    parse = store._parse_state

    def counted(lay: store.Layout, data: bytes) -> object:
        parses.append(data)
        return parse(lay, data)

    monkeypatch.setattr(store, "_parse_state", counted)
    store._SEEN.clear()
    tool, *args = command
    ok((coord if tool == "coord" else worker)(repo, *args))
    assert len(parses) == 1, f"{' '.join(command)} parsed the state {len(parses)} times"


def test_a_state_written_meanwhile_is_read_again_not_reused(make_repo: MakeRepo, coord: Cli,
                                                            worker: Cli) -> None:
    """`reuse` hands back the command's own State only while the file holds what that State
    was read from or saved as."""
    repo = scene(make_repo, coord, worker)
    lay = open_repo(str(repo)).lay
    mine = store.load(lay)
    assert store.load(lay, reuse=mine) is mine
    ok(coord(repo, "assign", "C", "--title", "C", "--expect", "e", "--write", "c.txt"))
    again = store.load(lay, reuse=mine)
    assert again is not mine and "C" in again.tasks and "C" not in mine.tasks
    with store.transaction(lay, reuse=mine) as st:  # another write since: read afresh
        assert "C" in st.tasks
        st.tasks["C"].title = "renamed"
    assert json.loads(lay.state_file.read_bytes())["tasks"]["C"]["title"] == "renamed"
