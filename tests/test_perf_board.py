"""`coord board`'s fragment changes only when what it shows does: ages are counted by the
page's script from the moments the fragment carries, so a poll of an unchanged board is
answered 304 however much time passed."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hunkwise.coordinator.board import Board
from hunkwise.shared.state.context import open_repo

from testing.cli import Cli, ok
from testing.repo import MakeRepo, numbered, set_line


@pytest.fixture
def scene(make_repo: MakeRepo, coord: Cli, worker: Cli) -> Path:
    repo = make_repo({"f.txt": numbered(10), "g.txt": numbered(10)})
    for tid, path in (("t1", "f.txt"), ("t2", "g.txt")):
        ok(coord(repo, "assign", tid, "--title", tid, "--expect", "e", "--write", path))
        ok(worker(repo, "start", tid))
    set_line(repo, "g.txt", 3, "t2's line")
    ok(worker(repo, "done", "t2"))  # a report in the inbox queue: its age is shown too
    return repo


def test_the_fragment_and_its_etag_stay_while_only_the_clock_moves(
        scene: Path, worker: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    board = Board(open_repo(str(scene)), None)
    _doc, html, etag = board.snapshot()
    assert html.count('<time class="age"') == 3  # t1's and t2's heartbeats, t2's report
    real = time.time
    for later in (1.0, 7.0, 95.0):
        monkeypatch.setattr(time, "time", lambda later=later: real() + later)
        board.refresh()
        assert board.snapshot()[1:] == (html, etag), f"{later}s later"
    ok(worker(scene, "heartbeat", "t1"))  # the state changes: so do the fragment and its tag
    board.refresh()
    assert board.snapshot()[2] != etag


def test_the_page_counts_the_ages_from_the_moments(scene: Path) -> None:
    board = Board(open_repo(str(scene)), None)
    doc, html, _etag = board.snapshot()
    hb = doc["tasks"][0]["claim"]
    assert hb is not None and f'data-at="{hb["heartbeat"]}"' in html
    assert f'data-at="{doc["inbox"]["queue"][0]["delivered"]}"' in html
    assert "time.age[data-at]" in board.page()[0]
