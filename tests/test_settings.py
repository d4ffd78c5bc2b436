"""Settings come from `coord.toml` as committed at HEAD, never from the working tree's copy.

A worker's half-edited copy must break no command, and an uncommitted (possibly unowned)
edit must change nothing the coordinator runs: not the notify command, not the TTL of a
claim, not the serial paths, not the recheck switch.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hunkwise.shared import git as hgit
from hunkwise.shared.state import store
from hunkwise.shared.state.context import open_repo

from testing.cli import Cli, ok
from testing.repo import MakeRepo, git, numbered, write

HALF_EDITED = "[claims]\nttl_seconds = \n[notify\n"


def start(coord: Cli, worker: Cli, repo: Path, tid: str, grant: str, *checks: str) -> None:
    extra = [a for c in checks for a in ("--check", c)]
    ok(coord(repo, "assign", tid, "--title", tid, "--expect", "e", "--write", grant, *extra))
    ok(worker(repo, "start", tid))


def test_a_half_edited_working_copy_breaks_no_command(make_repo: MakeRepo, coord: Cli,
                                                      worker: Cli) -> None:
    repo = make_repo({"f.txt": numbered(5), "coord.toml": "[claims]\nttl_seconds = 900\n"})
    start(coord, worker, repo, "A", "f.txt", "true")
    write(repo, "coord.toml", HALF_EDITED)  # someone is in the middle of editing it
    write(repo, "f.txt", numbered(5).replace("line 2", "two"))

    done = worker(repo, "done", "A")
    assert done.code == 0, done.stdout + done.stderr
    status = ok(coord(repo, "status"))
    assert status["config_differs"] is True
    ok(coord(repo, "review", "A"))


def test_the_committed_ttl_applies_not_the_working_copys(make_repo: MakeRepo, coord: Cli,
                                                         worker: Cli) -> None:
    repo = make_repo({"f.txt": numbered(5), "coord.toml": "[claims]\nttl_seconds = 900\n"})
    write(repo, "coord.toml", "[claims]\nttl_seconds = 1\n")
    start(coord, worker, repo, "A", "f.txt")

    claim = store.load(open_repo(str(repo)).lay).tasks["A"].claim
    assert claim is not None and claim.ttl == 900


def test_an_uncommitted_notify_command_is_not_the_one_in_force(make_repo: MakeRepo,
                                                              tmp_path: Path) -> None:
    repo = make_repo({"coord.toml": '[notify]\ncommand = "true"\n'})
    write(repo, "coord.toml", f'[notify]\ncommand = "touch {tmp_path}/pwned"\n')

    cfg = open_repo(str(repo)).config
    assert cfg.notify.command == "true"
    git(repo, "commit", "-q", "-am", "notify differently")
    assert open_repo(str(repo)).config.notify.command == f"touch {tmp_path}/pwned"


def test_uncommitted_serial_paths_do_not_apply_until_committed(make_repo: MakeRepo,
                                                               coord: Cli) -> None:
    repo = make_repo({"s.sql": numbered(6)})
    write(repo, "coord.toml", '[ownership]\nserial = ["*.sql"]\n')
    ok(coord(repo, "assign", "A", "--title", "a", "--expect", "e", "--write", "s.sql:1-2"))
    ok(coord(repo, "assign", "B", "--title", "b", "--expect", "e", "--write", "s.sql:4-5"))

    git(repo, "add", "coord.toml")
    git(repo, "commit", "-q", "-m", "serial sql")
    r = coord(repo, "assign", "C", "--title", "c", "--expect", "e", "--write", "s.sql:6-6")
    assert r.code == 3, r.stdout + r.stderr


def test_status_says_when_the_working_copy_differs(make_repo: MakeRepo, coord: Cli) -> None:
    repo = make_repo({"coord.toml": "[accept]\nrecheck = false\n"})
    assert ok(coord(repo, "status"))["config_differs"] is False
    write(repo, "coord.toml", "[accept]\nrecheck = true\n")

    assert ok(coord(repo, "status"))["config_differs"] is True
    assert open_repo(str(repo)).config.accept.recheck is False
    human = coord(repo, "status", json_out=False)
    assert human.code == 0
    assert "coord.toml in the working tree differs from HEAD" in human.stdout

    (repo / "coord.toml").unlink()
    assert ok(coord(repo, "status"))["config_differs"] is True


def test_a_new_uncommitted_coord_toml_differs_and_does_not_apply(make_repo: MakeRepo,
                                                                coord: Cli) -> None:
    repo = make_repo({"f.txt": "x\n"})
    write(repo, "coord.toml", "[checks]\ntimeout_seconds = 1\n")
    assert ok(coord(repo, "status"))["config_differs"] is True
    assert open_repo(str(repo)).config.checks.timeout_seconds == 900


def test_a_malformed_committed_coord_toml_is_exit_2_naming_the_line(
        make_repo: MakeRepo, coord: Cli, worker: Cli) -> None:
    repo = make_repo({"f.txt": numbered(3), "coord.toml": "[claims]\nttl_seconds = 900\n"})
    ok(coord(repo, "assign", "A", "--title", "a", "--expect", "e", "--write", "f.txt"))
    write(repo, "coord.toml", "[claims]\n\nttl_seconds = -5\n")
    git(repo, "commit", "-q", "-am", "bad ttl")

    r = worker(repo, "start", "A")

    assert r.code == 2
    message = r.doc["error"]["message"]
    assert "coord.toml" in message and "line 3" in message, message


def test_a_command_reads_the_settings_once(make_repo: MakeRepo, coord: Cli, worker: Cli,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    repo = make_repo({"f.txt": numbered(5), "coord.toml": "[checks]\ntimeout_seconds = 60\n"})
    start(coord, worker, repo, "A", "f.txt", "true")
    write(repo, "f.txt", "changed\n")
    reads: list[str] = []
    real = hgit.file_at

    def counting(repo: Path, rev: str, path: str) -> bytes | None:
        reads.append(f"{rev}:{path}")
        return real(repo, rev, path)

    monkeypatch.setattr(hgit, "file_at", counting)
    ok(worker(repo, "done", "A"))
    assert reads == ["HEAD:coord.toml"]
