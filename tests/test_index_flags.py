"""The snapshot asks `git ls-files -v` for flagged index entries only when the index file
holds one: `_any_flagged` reads the file itself, and must never miss a flag git reports."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import pytest
from hunkwise.shared.hunks import snapshot


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=True,
                          text=True).stdout


def flagged_by_git(repo: Path) -> bool:
    tags = [line[:1] for line in git(repo, "ls-files", "-v").splitlines()]
    return any(t.islower() or t == "S" for t in tags)


@pytest.mark.parametrize("fmt", ["sha1", "sha256"])
@pytest.mark.parametrize("version", [2, 3, 4])
def test_flags_are_found_in_the_index_file_as_git_lists_them(tmp_path: Path, fmt: str,
                                                             version: int) -> None:
    rnd = random.Random(f"{fmt}{version}")
    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", f"--object-format={fmt}", str(repo)], check=True)
    names = []
    for i in range(60):  # names of every length, so entries pad differently
        name = f"d{i % 5}/" + "n" * rnd.randint(1, 90) + f".{i}"
        (repo / name).parent.mkdir(exist_ok=True)
        (repo / name).write_text(f"{i}\n")
        names.append(name)
    git(repo, "add", "-A")
    git(repo, "update-index", "--index-version", str(version))
    index = str(repo / ".git" / "index")
    size = 20 if fmt == "sha1" else 32
    assert snapshot._any_flagged(index, size) is False
    for _round in range(12):
        path = rnd.choice(names)
        flag = rnd.choice(["--assume-unchanged", "--no-assume-unchanged", "--skip-worktree",
                           "--no-skip-worktree"])
        git(repo, "update-index", flag, path)
        assert snapshot._any_flagged(index, size) == flagged_by_git(repo), (flag, path)


def test_what_the_reading_is_not_sure_of_is_asked_of_git(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a").write_text("a\n")
    git(repo, "add", "-A")
    index = repo / ".git" / "index"
    assert snapshot._any_flagged(str(index), 20) is False
    git(repo, "update-index", "--split-index")  # entries kept in a shared index elsewhere
    assert snapshot._any_flagged(str(index), 20) is True
    for broken in (b"", b"DIRC", index.read_bytes()[:-30], b"XXXX" + index.read_bytes()[4:]):
        index.write_bytes(broken)
        assert snapshot._any_flagged(str(index), 20) is True
    assert snapshot._any_flagged(str(tmp_path / "no-such-index"), 20) is True
