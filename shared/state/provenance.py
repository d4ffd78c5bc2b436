"""Provenance: which session's own tool calls wrote which lines of which file.

The agent hooks note, after each tool call of a worker session, the whole lines the call
wrote (an Edit's new text, a Write's content, an apply_patch's added lines, what a shell
call changed when no other session's call overlapped it). Attribution reads it where the
file alone cannot tell two tasks apart (an insertion exactly at the boundary of two
grants): a change whose lines were written only by task X's session is X's. Provenance is
evidence, never a grant: it never makes a change outside a task's grants its own.

One append-only JSON-lines file in the state directory, `provenance.jsonl`; each line is
`{"session", "path", "lines": [sha256 hex of each line, its line ending stripped]}`. A
line of under PIPE_BUF bytes appended with O_APPEND lands whole, so concurrent hooks need
no lock; longer records are split into several lines. Nothing here imports the state
layer: the hooks run on every tool call and pay for each import.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

FILE = "provenance.jsonl"
# Appends of at most PIPE_BUF (4096 on Linux) bytes are atomic with O_APPEND.
_CHUNK = 40  # digests per line: 40 * 67 bytes plus the path stays under 4096 for paths < 1 KB


def line_digest(line: bytes) -> str:
    """The digest provenance keeps of one line: its bytes without the line ending."""
    return hashlib.sha256(line.rstrip(b"\r\n")).hexdigest()


def note(root: Path, session: str, path: str, lines: Iterable[bytes]) -> None:
    """Record that `session`'s own tool call wrote these whole lines into `path`
    (repository-relative, `/`-separated). Blank lines are not evidence of anything and
    are skipped."""
    digests = sorted({line_digest(ln) for ln in lines if ln.strip()})
    if not digests:
        return
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        for i in range(0, len(digests), _CHUNK):
            rec = {"session": session, "path": path, "lines": digests[i:i + _CHUNK]}
            os.write(fd, (json.dumps(rec, separators=(",", ":")) + "\n").encode())
    finally:
        os.close(fd)


def writers(root: Path, path: str) -> dict[str, frozenset[str]]:
    """For each line digest of `path`, the sessions whose tool calls wrote that line."""
    return all_writers(root).get(path, {})


def all_writers(root: Path) -> dict[str, dict[str, frozenset[str]]]:
    """{path: {line digest: sessions whose tool calls wrote that line}}. A torn or foreign
    line in the file is skipped: provenance is evidence, and missing evidence only means a
    question is asked instead of answered."""
    out: dict[str, dict[str, set[str]]] = {}
    try:
        data = (root / FILE).read_bytes()
    except OSError:
        return {}
    for raw in data.split(b"\n"):
        if not raw:
            continue
        try:
            rec = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(rec, dict):
            continue
        path, session, lines = rec.get("path"), rec.get("session"), rec.get("lines")
        if not (isinstance(path, str) and isinstance(session, str) and isinstance(lines, list)):
            continue
        per = out.setdefault(path, {})
        for d in lines:
            if isinstance(d, str):
                per.setdefault(d, set()).add(session)
    return {p: {d: frozenset(s) for d, s in per.items()} for p, per in out.items()}
