"""Provenance: which session's own tool calls wrote which lines of which file.

The agent hooks note, after each tool call of a worker session, the whole lines the call
wrote (an Edit's new text, a Write's content, an apply_patch's added lines, what a shell
call changed when no other session's call overlapped it). Attribution reads it where the
file alone cannot tell two tasks apart (an insertion exactly at the boundary of two
grants): a change whose lines were written only by task X's session is X's. Provenance is
evidence, never a grant: it never makes a change outside a task's grants its own.

One append-only JSON-lines file in the state directory, `provenance.jsonl`; each line is
`{"session", "path", "lines": [sha256 hex of each line written, its line ending stripped,
once per line], "removed": [the same, of each line removed]}` ("removed" may be absent). A
line of under PIPE_BUF bytes appended with O_APPEND lands whole, so concurrent hooks need
no lock; longer records are split into several lines. Nothing here imports the state
layer: the hooks run on every tool call and pay for each import.
"""

from __future__ import annotations

import os

from hunkwise.shared import fastjson

# The interpreter's own SHA-256 where it has one: hashlib loads OpenSSL first, some 10 ms
# of every after-call hook on a small machine. The same digest either way.
try:
    from _sha2 import sha256 as _sha256  # type: ignore[import-not-found]  # 3.12 and later
except ImportError:
    try:
        from _sha256 import sha256 as _sha256  # type: ignore[import-not-found]  # 3.11
    except ImportError:  # an interpreter built without its own hashes
        from hashlib import sha256 as _sha256

TYPE_CHECKING = False
if TYPE_CHECKING:  # (the hooks note provenance: no pathlib, json or typing at run time)
    from collections.abc import Collection, Iterable
    from pathlib import Path

    StrPath = str | os.PathLike[str]

FILE = "provenance.jsonl"
# Past this size the record is pruned to the sessions still at work (`prune`).
PRUNE_AT = 4 << 20
# Appends of at most PIPE_BUF (4096 on Linux) bytes are atomic with O_APPEND.
_CHUNK = 40  # digests per line: 40 * 67 bytes plus the path stays under 4096 for paths < 1 KB


def line_digest(line: bytes) -> str:
    """The digest provenance keeps of one line: its bytes without the line ending."""
    return str(_sha256(line.rstrip(b"\r\n")).hexdigest())


def note(root: StrPath, session: str, path: str, lines: Iterable[bytes],
         removed: Iterable[bytes] = ()) -> None:
    """Record that `session`'s own tool call wrote these whole lines into `path`
    (repository-relative, `/`-separated), and removed those. Only the lines the call
    changed count: a Write of a whole file notes the lines that differ from what was
    there, never the file's unchanged lines."""
    wrote = sorted(line_digest(ln) for ln in lines)
    gone = sorted(line_digest(ln) for ln in removed)
    if not wrote and not gone:
        return
    os.makedirs(root, exist_ok=True)
    fd = os.open(os.path.join(root, FILE), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        for i in range(0, max(len(wrote), len(gone)), _CHUNK):
            rec: dict[str, object] = {"session": session, "path": path,
                                      "lines": wrote[i:i + _CHUNK]}
            if gone[i:i + _CHUNK]:
                rec["removed"] = gone[i:i + _CHUNK]
            os.write(fd, (fastjson.dumps(rec) + "\n").encode())
    finally:
        os.close(fd)


def root_of(repo: Path) -> Path:
    """The state directory of `repo` (as the store lays it out), without the store."""
    from pathlib import Path

    env = os.environ.get("COORD_DIR")
    if env:
        return Path(env).resolve()
    from hunkwise.shared import git

    return git.common_dir(repo) / "coord"


def writers(root: Path, path: str) -> dict[str, dict[str, int]]:
    """For each line digest of `path`: {session: how many such lines its calls wrote}."""
    return all_writers(root).get(path, {})


def all_removers(root: Path) -> dict[str, dict[str, dict[str, int]]]:
    """{path: {line digest: {session: how many such lines its calls removed}}}."""
    return _read(root)[1]


def all_writers(root: Path) -> dict[str, dict[str, dict[str, int]]]:
    """{path: {line digest: {session: how many such lines its calls wrote}}}. A torn or
    foreign line in the file is skipped: provenance is evidence, and missing evidence only
    means a question is asked instead of answered."""
    return _read(root)[0]


Table = dict[str, dict[str, dict[str, int]]]


def _read(root: Path, paths: Collection[str] | None = None) -> tuple[Table, Table]:
    """(written, removed) in one pass over the record, for `paths` only when given."""
    wrote: Table = {}
    gone: Table = {}
    try:
        with open(os.path.join(root, FILE), "rb") as f:
            data = f.read()
    except OSError:
        return wrote, gone
    for raw in data.split(b"\n"):
        if not raw:
            continue
        try:
            rec = fastjson.loads(raw)
        except (ValueError, RecursionError):
            continue
        if not isinstance(rec, dict):
            continue
        path, session = rec.get("path"), rec.get("session")
        if not (isinstance(path, str) and isinstance(session, str)):
            continue
        if paths is not None and path not in paths:
            continue
        for key, out in (("lines", wrote), ("removed", gone)):
            lines = rec.get(key, [])
            if not isinstance(lines, list) or not lines:
                continue
            per = out.setdefault(path, {})
            for d in lines:
                if isinstance(d, str):
                    by = per.setdefault(d, {})
                    by[session] = by.get(session, 0) + 1
    return wrote, gone


def evidence(root: Path, task_of: dict[str, str], paths: Collection[str] | None = None
             ) -> dict[str, dict[str, tuple[dict[str, int], dict[str, int]]]]:
    """Per path (of `paths`, when given) and line digest: ({task: lines its sessions
    wrote}, {task: lines its sessions removed}), sessions mapped to tasks by `task_of`; a
    session of no active task (the coordinator's, a finished task's) counts as someone
    else's. The record is read once."""
    if not os.path.exists(os.path.join(root, FILE)):
        return {}
    wrote, gone = _read(root, paths)
    out: dict[str, dict[str, tuple[dict[str, int], dict[str, int]]]] = {}
    for path in set(wrote) | set(gone):
        w, g = wrote.get(path, {}), gone.get(path, {})
        per: dict[str, tuple[dict[str, int], dict[str, int]]] = {}
        for d in set(w) | set(g):
            per[d] = _net(_by_task(w.get(d, {}), task_of), _by_task(g.get(d, {}), task_of))
        out[path] = per
    return out


def _net(wrote: dict[str, int], gone: dict[str, int]
         ) -> tuple[dict[str, int], dict[str, int]]:
    """What each task wrote and removed on balance: a line a task wrote and removed again
    (a docstring rewritten, then the function deleted) is evidence of neither."""
    w, g = {}, {}
    for t in set(wrote) | set(gone):
        n = wrote.get(t, 0) - gone.get(t, 0)
        if n > 0:
            w[t] = n
        elif n < 0:
            g[t] = -n
    return w, g


def _by_task(by_session: dict[str, int], task_of: dict[str, str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for sess, n in by_session.items():
        t = task_of.get(sess, "?" + sess)
        out[t] = out.get(t, 0) + n
    return out


def prune(root: Path, live: Collection[str], at: int = PRUNE_AT) -> int:
    """Keep only the records of `live` sessions (those holding an active task), once the
    record has grown past `at` bytes; how many records were dropped.

    The record is moved aside, read, and what is kept appended to the live file as the
    hooks append to it (records are counted, never ordered): a hook writing meanwhile
    loses nothing but, at worst, a line written through a descriptor opened before the
    move, and missing evidence only means a question is asked."""
    path = root / FILE
    try:
        if path.stat().st_size <= at:
            return 0
    except OSError:
        return 0
    aside = root / f"{FILE}.pruning"
    try:
        os.replace(path, aside)
        data = aside.read_bytes()
    except OSError:
        return 0
    kept: list[bytes] = []
    dropped = 0
    for raw in data.split(b"\n"):
        if not raw:
            continue
        try:
            rec = fastjson.loads(raw)
        except (ValueError, RecursionError):
            dropped += 1
            continue
        if isinstance(rec, dict) and rec.get("session") in live:
            kept.append(raw + b"\n")
        else:
            dropped += 1
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        for i in range(0, len(kept), 256):
            os.write(fd, b"".join(kept[i:i + 256]))
    finally:
        os.close(fd)
    aside.unlink(missing_ok=True)
    return dropped
