"""Test repositories: git run in them, files written into them, and a builder."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

# The `make_repo` fixture: make_repo({"path": content, ...}, commit=True) -> repo.
MakeRepo = Callable[..., Path]


def git(repo: Path, *args: str, input: bytes | None = None, check: bool = True) -> str:
    proc = subprocess.run(["git", *args], cwd=repo, input=input, capture_output=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr.decode()}")
    return proc.stdout.decode("utf-8", "surrogateescape")


def git_bytes(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, check=True).stdout


def write(repo: Path, path: str, content: str | bytes) -> Path:
    p = repo / path
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        content = content.encode()
    p.write_bytes(content)
    return p


def numbered(n: int, prefix: str = "line") -> str:
    return "".join(f"{prefix} {i}\n" for i in range(1, n + 1))


def set_line(repo: Path, path: str, n: int, text: str) -> None:
    p = repo / path
    rows = p.read_bytes().split(b"\n")
    rows[n - 1] = text.encode()
    p.write_bytes(b"\n".join(rows))


_TEMPLATES: dict[tuple[object, ...], Path] = {}


def build_repo(repo: Path, files: dict[str, str | bytes] | None = None, *,
               commit: bool = True, templates: Path | None = None) -> Path:
    """A new repository at `repo` (which must not exist) holding `files`, in one commit
    unless `commit` is false.

    `templates`: a folder of this process's where a repository built once is kept, and
    copied for the next test that asks for the same files (the same bytes, the same
    commit: author and dates are pinned), instead of three more git processes."""
    if templates is not None:
        import shutil

        key = (commit, *sorted((p, c.encode() if isinstance(c, str) else c)
                               for p, c in (files or {}).items()))
        kept = _TEMPLATES.get(key)
        if kept is None or not kept.exists():
            kept = templates / f"t{len(_TEMPLATES)}"
            build_repo(kept, files, commit=commit)
            _TEMPLATES[key] = kept
        shutil.copytree(kept, repo, symlinks=True)
        return repo
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    # What `git config user.name/user.email` would write, without two more processes.
    with open(repo / ".git" / "config", "a") as config:
        config.write("[user]\n\tname = Test Author\n\temail = author@example.com\n")
    for path, content in (files or {}).items():
        write(repo, path, content)
    if commit:
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "--allow-empty", "-m", "init")
    return repo
