"""A `coord.toml` that does not load: refused at `coord commit`, reported by `coord status`."""

from __future__ import annotations

import pytest

from testing.cli import Cli, error_message, ok
from testing.repo import MakeRepo, git, write


@pytest.mark.parametrize(("text", "line", "expected"), [
    ('[verify]\ncommand = "pytest"\n', 2, "did you mean commands?"),
    ('[verfy]\ncommands = ["pytest"]\n', 1, "did you mean verify?"),
    ('[claims]\nttl_seconds = 60\n\n[ownership]\nserail = ["x"]\n', 5, "did you mean serial?"),
    ('[verify]\nzzz = 1\n', 2, "known keys of [verify]: bisect, commands, timeout_seconds"),
])
def test_coord_commit_refuses_a_coord_toml_that_does_not_load(coord: Cli, make_repo: MakeRepo,
                                                              text: str, line: int,
                                                              expected: str) -> None:
    repo = make_repo({"a.txt": "a\n"})
    head = git(repo, "rev-parse", "HEAD")
    write(repo, "coord.toml", text)
    r = coord(repo, "commit", "coord.toml", "-m", "settings")
    assert r.code == 2, r
    msg = error_message(r)
    assert f"(line {line})" in msg and expected in msg and "nothing committed" in msg
    assert git(repo, "rev-parse", "HEAD") == head


def test_coord_commit_refuses_a_toml_syntax_error(coord: Cli, make_repo: MakeRepo) -> None:
    repo = make_repo({"a.txt": "a\n"})
    write(repo, "coord.toml", '[verify]\ncommands = [pytest]\n')
    r = coord(repo, "commit", "coord.toml", "-m", "settings")
    assert r.code == 2 and "line 2" in error_message(r)


def test_a_valid_coord_toml_is_committed(coord: Cli, make_repo: MakeRepo) -> None:
    repo = make_repo({"a.txt": "a\n"})
    write(repo, "coord.toml", '[verify]\ncommands = ["true"]\n')
    assert ok(coord(repo, "commit", "coord.toml", "-m", "settings"))["paths"] == ["coord.toml"]


def test_status_reports_settings_at_head_that_do_not_load(coord: Cli, worker: Cli,
                                                          make_repo: MakeRepo) -> None:
    # Committed behind hunkwise's back (plain git), as a newcomer might.
    repo = make_repo({"coord.toml": '[verify]\ncommand = "pytest"\n'})
    r = coord(repo, "status", json_out=False)
    assert r.code == 0, r
    problem = next(line for line in r.stdout.split("\n") if line.startswith("problem:"))
    assert "coord.toml at HEAD" in problem and "'command'" in problem and "commands" in problem
    assert "Traceback" not in r.stderr
    assert ok(coord(repo, "status"))["settings_problem"]
    # assign (and worker start) name the file, the line, and the way out.
    r = coord(repo, "assign", "t1", "--title", "T", "--expect", "E", "--write", "a.txt")
    assert r.code == 2
    msg = error_message(r)
    assert "coord.toml at HEAD" in msg and "(line 2)" in msg
    assert "coord commit coord.toml" in msg
    write(repo, "coord.toml", '[verify]\ncommands = ["pytest"]\n')
    ok(coord(repo, "commit", "coord.toml", "-m", "fix"))
    assert ok(coord(repo, "status"))["settings_problem"] is None
