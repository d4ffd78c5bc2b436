"""The event log (`events.jsonl` in the state): what the watcher saw that no state holds,
such as a write outside every grant, or a notice that could not be sent.

Appended to, one line per event, and read from its end: `coord status` and the board show
the newest ones. It is not the state: no lock, no schema beyond one JSON object a line.
"""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING, cast

from hunkwise.shared.state import store
from hunkwise.shared.state.context import iso

if TYPE_CHECKING:
    from hunkwise.shared.state.documents import WatchEvent

FILE = "events.jsonl"
MAX_SHOWN = 20


def append(lay: store.Layout, kind: str, path: str, detail: str = "") -> WatchEvent:
    ev: WatchEvent = {"at": iso(time.time()), "kind": kind, "path": path, "detail": detail}
    line = (json.dumps(ev) + "\n").encode()
    store.ensure(lay)
    # One O_APPEND write per event: concurrent writers never interleave within a line.
    fd = os.open(lay.root / FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
    return ev


def recent(lay: store.Layout, n: int = MAX_SHOWN) -> list[WatchEvent]:
    """The newest `n` events, oldest first (read from the log's last 64 KiB)."""
    try:
        with open(lay.root / FILE, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            lines = f.read().split(b"\n")
    except FileNotFoundError:
        return []
    out: list[WatchEvent] = []
    for raw in lines[-(n + 1):]:
        try:
            ev = json.loads(raw)
        except ValueError:
            continue
        if isinstance(ev, dict):
            out.append(cast("WatchEvent", ev))  # a line `append` wrote
    return out[-n:]
