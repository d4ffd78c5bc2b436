"""The checkout, the interpreter, and the hermetic environment every test runs in."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

# Variables of the user's environment that would reach git or the tools: dropped.
DROPPED_PREFIXES = ("GIT_", "COORD_")


def hermetic_env(home: Path, path: str) -> dict[str, str]:
    """The environment of a test: HOME, XDG and git's system and global config pointed away
    from the user's, author, committer and dates pinned, this interpreter's bin put before `path`.
    `home` gets a .gitconfig naming `main` the default branch."""
    (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n")
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"),
        "GIT_AUTHOR_NAME": "Test Author",
        "GIT_AUTHOR_EMAIL": "author@example.com",
        "GIT_COMMITTER_NAME": "Test Committer",
        "GIT_COMMITTER_EMAIL": "committer@example.com",
        "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
        "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
        "TZ": "UTC",
        "PATH": f"{BIN}{os.pathsep}{path}",
    }
