"""`coord watch` as a newcomer meets it: editors' and sed's scratch files are no events,
and a first watch does not announce a thaw or a verify of minutes ago."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from hunkwise.coordinator.watch import Watcher, is_scratch_name
from hunkwise.shared.state.context import open_repo

from testing.cli import Cli, ok
from testing.env import BIN
from testing.repo import MakeRepo, numbered, write
from testing.wait import Lines

S = "sess-20260101-0000-worker@m"


@pytest.mark.parametrize("name", [".#notes.txt", "#notes.txt#", "notes.txt~", ".notes.txt.swp",
                                  ".notes.txt.swx", "4913", "5036"])
def test_editor_scratch_names(name: str) -> None:
    assert is_scratch_name(name)


@pytest.mark.parametrize("name", ["notes.txt", "sedless.txt", "1234", "2024", "swp", "a.swp"])
def test_real_names_are_not_scratch(name: str) -> None:
    assert not is_scratch_name(name)


def test_a_write_gone_by_the_rescan_is_no_event(make_repo: MakeRepo, coord: Cli) -> None:
    repo = make_repo({"f.txt": numbered(3), "tracked.txt": "t\n"})
    ok(coord(repo, "assign", "t1", "--title", "T", "--expect", "E", "--write", "f.txt"))
    out = io.StringIO()
    w = Watcher(open_repo(str(repo)), out=out)
    os.remove(repo / "tracked.txt")  # a tracked file deleted: still an event
    write(repo, "notes.txt~", "backup\n")  # exists, but an editor's backup
    write(repo, "stray.txt", "real\n")
    w.tree_writes({str(repo / "sed0tKb5I"), str(repo / ".#f.txt"), str(repo / "notes.txt~"),
                   str(repo / "tracked.txt"), str(repo / "stray.txt"), str(repo / "f.txt")})
    assert sorted(e["path"] for e in w.events) == ["stray.txt", "tracked.txt"]
    assert ok(coord(repo, "status"))["events"] == w.events


def test_sed_in_place_on_a_granted_file_records_nothing(make_repo: MakeRepo, coord: Cli) -> None:
    repo = make_repo({"f.txt": numbered(3)})
    ok(coord(repo, "assign", "t1", "--title", "T", "--expect", "E", "--write", "f.txt"))
    proc = subprocess.Popen([str(BIN / "coord"), "watch", "--interval", "0.5"], cwd=repo,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines = Lines(proc.stderr)
    lines.wait_for("watching: ready")
    for _ in range(5):
        subprocess.run(["sed", "-i", "s/line/LINE/", "f.txt"], cwd=repo, check=True)
    write(repo, "stray.txt", "x\n")  # the last write: once its event shows, the rest was judged
    lines.wait_for("event: write-outside-grants: stray.txt")
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    events = ok(coord(repo, "status"))["events"]
    assert [e["path"] for e in events] == ["stray.txt"], events


def test_the_first_watch_does_not_announce_old_thaws_and_verifies(
        make_repo: MakeRepo, coord: Cli, worker: Cli, tmp_path: Path) -> None:
    log = tmp_path / "notify.log"
    repo = make_repo({"a.txt": "a\n", "coord.toml": '[verify]\ncommands = ["true"]\n'
                      f'[notify]\ncommand = "cat >> {log}; echo >> {log}"\n'})
    ok(coord(repo, "assign", "t1", "--title", "T", "--expect", "E", "--write", "a.txt"))
    ok(coord(repo, "freeze"))
    ok(coord(repo, "verify"))
    ok(coord(repo, "thaw"))
    ok(worker(repo, "start", "t1", session=S))
    write(repo, "a.txt", "b\n")
    ok(worker(repo, "done", "t1", session=S))
    r = coord(repo, "watch", "--timeout", "0.5", "--interval", "0.1")
    assert r.code == 0, r.stderr
    sent = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    assert [e.get("event", "report") for e in sent] == ["report"], sent
    # What happens while it watches is news: a thaw after the next freeze is announced.
    ok(coord(repo, "freeze"))
    ok(coord(repo, "thaw"))
    coord(repo, "watch", "--timeout", "0.5", "--interval", "0.1")
    sent = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    assert [e.get("event") for e in sent][1:] == ["thaw"], sent
