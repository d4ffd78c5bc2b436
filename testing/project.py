"""A repository whose coord.toml lists `coord verify` commands, for freezes and verifies."""

from __future__ import annotations

import json
from pathlib import Path

from testing.repo import MakeRepo, numbered

PASSING_CHECK = "import sys\nsys.exit(0)\n"
FAILING_CHECK = "import sys\nprint('the half-done edit breaks the build')\nsys.exit(1)\n"


def verify_toml(commands: list[str], timeout: float | None = None) -> str:
    """A coord.toml whose `[verify]` runs `commands`, within `timeout` seconds if given."""
    # JSON string escapes are valid TOML basic-string escapes.
    text = "[verify]\ncommands = [" + ", ".join(json.dumps(c) for c in commands) + "]\n"
    if timeout is not None:
        text += f"timeout_seconds = {timeout}\n"
    return text


def project(make_repo: MakeRepo, commands: list[str] | None = None, *,
            timeout: float | None = None, files: dict[str, str] | None = None) -> Path:
    """A repo with a passing check.py, app.txt, notes.txt and a coord.toml."""
    base: dict[str, str | bytes] = {
        "check.py": PASSING_CHECK,
        "app.txt": numbered(10),
        "notes.txt": "notes\n",
        "coord.toml": verify_toml(["python3 check.py"] if commands is None else commands,
                                  timeout),
    }
    base.update(files or {})
    return make_repo(base)
