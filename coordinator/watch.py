"""`coord watch`: a watchdog observer that never interrupts the coordinator.

Each report that arrives joins the queue view and is notified (`[notify] command` with the
report's summary as JSON on stdin, and `[notify] urls`); so is everything else that needs
the human supervisor (coordinator/notify.py: stale claims, decisions, blocked workers,
freeze and thaw, verify results, lost work), once each, across restarts. Tree writes
outside every grant, and any write during a freeze, are recorded as events that
`coord status` shows. File-system events are only
hints (watchdog reports a renamed-in file as created or moved, and drops events on
overflow): every wake rescans the inbox until its listing is stable, and a periodic
rescan catches whatever the observer missed. Reports are never moved: the queue belongs
to `coord next`.
"""

from __future__ import annotations

import json
import os
import queue
import re
import sys
import time
from typing import TYPE_CHECKING, Any

from hunkwise import inbox
from hunkwise.shared import git
from hunkwise.shared.hunks.globs import grant_covers
from hunkwise.shared.output import one_line
from hunkwise.shared.state import events, store
from hunkwise.shared.state.context import Ctx

if TYPE_CHECKING:
    from hunkwise.shared.state.documents import ReportArrival, WatchEvent, WatchResult

SEEN = "watch-seen.json"
DEDUPE_S = 2.0
# Lost work needs a view of the whole tree: look for it at most this often.
LOST_EVERY_S = 30.0


def _load_seen(lay: store.Layout) -> set[str]:
    try:
        data = json.loads((lay.root / SEEN).read_text())
        return set(data) if isinstance(data, list) else set()
    except (FileNotFoundError, ValueError):
        return set()


def _save_seen(lay: store.Layout, seen: set[str]) -> None:
    store.atomic_write(lay.root / SEEN, json.dumps(sorted(seen)[-10000:]).encode())


# Editors' scratch files, which come and go while a file is saved: Emacs' lock (`.#x`) and
# auto-save (`#x#`), backups (`x~`), Vim's swap files (`.x.swp`, `.x.swo`..., `.x.swx`) and the file
# it writes to test that a directory is writable (`4913`, then 5036, 5159...).
_SCRATCH = re.compile(r"^(\.#.*|#.*#|.*~|\..*\.s[vw][a-z]|[0-9]{4,5})$")


def is_scratch_name(name: str) -> bool:
    if not _SCRATCH.match(name):
        return False
    # Vim's probe names are 4913 + k*123; any other number may be a real file.
    return not name.isdigit() or (int(name) >= 4913 and (int(name) - 4913) % 123 == 0)


class Watcher:
    def __init__(self, ctx: Ctx, *, out: Any = None) -> None:
        self.ctx = ctx
        self.lay = ctx.lay
        self.seen = _load_seen(self.lay)
        self.notified: list[ReportArrival] = []
        self.events: list[WatchEvent] = []
        self.out = out or sys.stderr
        self.hints: queue.Queue[tuple[str, str]] = queue.Queue()
        self.git_dir = str(git.common_dir(ctx.repo).resolve())
        self._last: dict[tuple[str, str], float] = {}
        from hunkwise.coordinator.notify import Notifier

        self.notifier = Notifier(ctx, say=self._say)
        self._lost_at = -1e9

    def _say(self, line: str) -> None:
        self.out.write(line + "\n")
        self.out.flush()

    # ---- the inbox ----
    def _stable_listing(self) -> list[inbox.Entry]:
        last: list[str] | None = None
        for _ in range(20):
            entries, _odd = inbox.entries(self.lay.inbox, "new")
            names = [e.name for e in entries]
            if names == last:
                return entries
            last = names
            time.sleep(0.02)
        return entries

    def scan_inbox(self) -> None:
        fresh = [e for e in self._stable_listing() if e.name not in self.seen]
        for e in fresh:
            self.seen.add(e.name)
            summary: ReportArrival
            try:
                report = inbox.read_report(e.path)
                summary = {"task_id": report.task_id, "status": report.status,
                           "title": report.title, "revision": report.revision,
                           "kind": report.kind, "summary": report.summary,
                           "checks_passed": sum(1 for c in report.checks if c.passed),
                           "checks_total": len(report.checks), "file": e.name}
                if report.reason:
                    summary["reason"] = report.reason
            except Exception as err:  # noqa: BLE001 - a bad report is coord next's to quarantine
                summary = {"task_id": e.task_id, "status": "unreadable", "file": e.name,
                           "error": str(err)[:300]}
            self._notify(summary)
        if fresh:
            _save_seen(self.lay, self.seen)

    def _notify(self, summary: ReportArrival) -> None:
        from hunkwise.coordinator.notify import report_event

        self.notified.append(summary)
        # Worker-written text never drives the terminal, nor forges a line of its own.
        self.out.write(f"report: {one_line(summary['task_id'])} [{one_line(summary['status'])}] "
                       f"{one_line(summary.get('title', ''))}\n")
        self.out.flush()
        try:
            self.notifier.offer([report_event(summary)])
        except Exception as err:  # noqa: BLE001 - the watcher outlives any one report
            self._event("watch-error", summary["task_id"], f"{type(err).__name__}: {str(err)[:200]}")
        self.deliver()

    # ---- what else needs the supervisor ----
    def scan_state(self, *, periodic: bool = False) -> None:
        """Offer the state's events; a failure here is recorded, never fatal."""
        from hunkwise.coordinator.notify import collect

        now = time.monotonic()
        with_lost = periodic and now - self._lost_at >= LOST_EVERY_S
        if with_lost:
            self._lost_at = now
        try:
            from hunkwise.coordinator.launch import exited_events

            self.notifier.offer(collect(self.ctx, with_lost=with_lost) + exited_events(self.ctx))
        except Exception as err:  # noqa: BLE001 - the watcher outlives any one scan
            self._event("watch-error", "state", f"{type(err).__name__}: {str(err)[:200]}")
        self.deliver()

    def deliver(self) -> None:
        try:
            self.notifier.deliver_due()
        except Exception as err:  # noqa: BLE001 - a notifier never stops the watcher
            self._event("watch-error", "notify", f"{type(err).__name__}: {str(err)[:200]}")

    # ---- the tree ----
    def _event(self, kind: str, path: str, detail: str = "") -> None:
        key = (kind, path)
        now = time.monotonic()
        if now - self._last.get(key, -1e9) < DEDUPE_S:
            return  # one write raises several events (create, modify, close)
        self._last[key] = now
        ev = events.append(self.lay, kind, path, detail)
        self.events.append(ev)
        self.out.write(f"event: {kind}: {one_line(path)}"
                       f"{' (' + one_line(detail) + ')' if detail else ''}\n")
        self.out.flush()

    def tree_writes(self, paths: set[str]) -> None:
        rel = []
        root = str(self.ctx.repo)
        for p in paths:
            if p.startswith(self.git_dir) or p.startswith(str(self.lay.root)):
                continue
            r = os.path.relpath(p, root)
            if r.startswith("..") or r == "." or r.split(os.sep)[0] == ".git":
                continue
            if os.path.isdir(p):
                continue
            rel.append(r)
        rel = [r for r in rel if not is_scratch_name(os.path.basename(r))]
        if not rel:
            return
        ignored = set(self._ignored(rel))
        rel = [r for r in rel if r not in ignored]
        # A file written and gone again by the rescan (sed -i's `sedXXXXXX`, an editor's
        # save-by-rename) changed nothing in the tree: not an event. A tracked file that
        # is gone is a deletion, and stays one.
        gone = [r for r in rel if not os.path.lexists(os.path.join(root, r))]
        if gone:
            tracked = set(self._tracked(gone))
            rel = [r for r in rel if r not in gone or r in tracked]
        if not rel:
            return
        state = store.load(self.lay)
        active = [t for t in state.tasks.values() if t.active]
        for r in sorted(set(rel)):
            if state.freeze is not None:
                self._event("write-during-freeze", r, f"batch {state.freeze.batch}")
                continue
            owned = any(grant_covers(g, r) for t in active for g in t.grants)
            if not owned:
                self._event("write-outside-grants", r)

    def _tracked(self, rel: list[str]) -> list[str]:
        rc, out = git.run_rc(self.ctx.repo, "ls-files", "-z", "--", *rel)
        return [os.fsdecode(x) for x in out.split(b"\0") if x] if rc == 0 else []

    def _ignored(self, rel: list[str]) -> list[str]:
        rc, out = git.run_rc(self.ctx.repo, "check-ignore", "-z", "--stdin",
                             input=b"".join(os.fsencode(r) + b"\0" for r in rel))
        return [os.fsdecode(x) for x in out.split(b"\0") if x] if rc in (0, 1) else []

    # ---- the loop ----
    def run(self, timeout: float | None, interval: float) -> None:
        from watchdog.events import FileSystemEvent, FileSystemEventHandler
        from watchdog.observers import Observer

        hints = self.hints
        inbox_new = str((self.lay.inbox / "new").resolve())
        root = str(self.lay.root.resolve())
        state_files = (str(self.lay.state_file.resolve()), os.path.join(root, "verifications"))

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: FileSystemEvent) -> None:
                if event.event_type in ("opened", "closed_no_write"):
                    return
                for p in (event.src_path, getattr(event, "dest_path", "") or ""):
                    if p:
                        p = os.fsdecode(p)
                        if p.startswith(state_files):
                            hints.put(("state", p))
                        else:
                            hints.put(("inbox" if p.startswith(inbox_new) else "tree", p))

        store.ensure(self.lay)
        observer = Observer()
        observer.schedule(Handler(), inbox_new, recursive=False)
        observer.schedule(Handler(), str(self.ctx.repo), recursive=True)
        if os.path.commonpath([root, str(self.ctx.repo.resolve())]) != str(self.ctx.repo.resolve()):
            (self.lay.root / "verifications").mkdir(parents=True, exist_ok=True)
            observer.schedule(Handler(), root, recursive=True)  # $COORD_DIR elsewhere
        observer.start()
        deadline = None if timeout is None else time.monotonic() + timeout
        next_scan = 0.0
        from hunkwise.shared.proc import restore_signals, stop_on_signals

        saved = stop_on_signals()
        try:
            # The watches are in place once start() returns (the emitters add them before
            # their threads run): say so, so a supervisor's script can wait for it. Inside
            # the try: an interrupt right after the line stops it as cleanly as any other.
            self.out.write("watching: ready\n")
            self.out.flush()
            while deadline is None or time.monotonic() < deadline:
                now = time.monotonic()
                if now >= next_scan:
                    # The state first: on a first watch its history (old thaws, verifies)
                    # is taken as known before a report's notice creates the outbox.
                    self.scan_state(periodic=True)
                    self.scan_inbox()  # the periodic rescan: catches what the observer dropped
                    next_scan = now + interval
                else:
                    self.deliver()  # retries whose backoff ended
                due = self.notifier.next_due()
                wake = next_scan if due is None else min(next_scan, now + max(0.0, due - time.time()))
                wait = min(wake, deadline or wake) - time.monotonic()
                try:
                    kind, path = hints.get(timeout=max(0.01, wait))
                except queue.Empty:
                    continue
                batch = [(kind, path)]
                time.sleep(0.05)  # let a burst settle, then take it whole
                while True:
                    try:
                        batch.append(hints.get_nowait())
                    except queue.Empty:
                        break
                if any(k == "inbox" for k, _ in batch):
                    self.scan_inbox()
                if any(k == "state" for k, _ in batch):
                    self.scan_state()
                self.tree_writes({p for k, p in batch if k == "tree"})
        except KeyboardInterrupt:
            pass
        finally:
            restore_signals(saved)
            observer.stop()
            observer.join(timeout=5)


def watch(ctx: Ctx, *, timeout: float | None, interval: float) -> WatchResult:
    w = Watcher(ctx)
    w.run(timeout, interval)
    return {"notified": w.notified, "events": w.events,
            "delivered": [{"event": e["event"], "id": e["id"], "subject": e["subject"]}
                          for e in w.notifier.delivered],
            "notify_failures": w.notifier.failures}
