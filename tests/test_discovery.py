"""Finding the repository without a git process: wherever `_plain_repo` answers, it gives
what `git rev-parse` gives; where it cannot be sure, it leaves the question to git."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hunkwise.shared import git as hgit


def rev_parse(start: Path) -> tuple[Path, Path, Path, str]:
    out = subprocess.run(["git", "rev-parse", "--show-toplevel", "--git-common-dir",
                          "--absolute-git-dir", "--show-object-format"], cwd=start,
                         capture_output=True, check=True).stdout.decode().split("\n")
    common = Path(out[1]) if Path(out[1]).is_absolute() else (start / out[1]).resolve()
    return Path(out[0]), common, Path(out[2]), out[3]


def init(path: Path, *args: str) -> Path:
    subprocess.run(["git", "init", "-q", *args, str(path)], check=True)
    return path


def config(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "config", *args], check=True)


def test_a_plain_repository_is_found_as_git_finds_it(tmp_path: Path) -> None:
    repo = init(tmp_path / "r")
    (repo / "sub" / "deep").mkdir(parents=True)
    sha256 = init(tmp_path / "s", "--object-format=sha256")
    os.symlink(repo, tmp_path / "link")
    for start in (repo, repo / "sub", repo / "sub" / "deep", sha256, tmp_path / "link" / "sub"):
        found = hgit._plain_repo(start)
        assert found is not None and tuple(found) == rev_parse(start), start
    assert hgit._plain_repo(sha256) is not None
    assert hgit._plain_repo(sha256).object_format == "sha256"  # type: ignore[union-attr]


def test_what_it_cannot_be_sure_of_is_left_to_git(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    repo = init(tmp_path / "r")
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", str(tmp_path / "wt")],
                   check=True)
    assert hgit._plain_repo(tmp_path / "wt") is None  # a linked worktree's .git file
    cases = {"worktree": ("core.worktree", str(tmp_path)), "bare": ("core.bare", "true"),
             "include": ("include.path", "elsewhere"), "ext": ("extensions.worktreeConfig", "true")}
    for name, (key, value) in cases.items():
        other = init(tmp_path / name)
        config(other, key, value)
        assert hgit._plain_repo(other) is None, name
    plain = init(tmp_path / "plain")
    assert hgit._plain_repo(plain) is not None
    for key, value in (("GIT_CEILING_DIRECTORIES", str(tmp_path)), ("GIT_CONFIG_COUNT", "1")):
        monkeypatch.setenv(key, value)
        assert hgit._plain_repo(plain) is None, key
        monkeypatch.delenv(key)
    (plain / ".git" / "config").write_text("[core]\n\tbare\n")  # a bare key: true
    assert hgit._plain_repo(plain) is None
    assert hgit._plain_repo(tmp_path) is None  # no repository at all


def test_a_command_in_a_plain_repository_starts_no_rev_parse(tmp_path: Path) -> None:
    repo = init(tmp_path / "r")
    trace = tmp_path / "trace"
    env = {**os.environ, "GIT_TRACE2_EVENT": str(trace)}
    coord = Path(sys.executable).parent / "coord"
    subprocess.run([str(coord), "status", "--json"], cwd=repo, env=env, check=True,
                   capture_output=True)
    started = trace.read_text()
    assert '"cat-file"' in started  # the trace holds the command's git processes
    assert '"rev-parse"' not in started
