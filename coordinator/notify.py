"""What needs the human supervisor, told once: the events and their delivery.

An event is a fact the supervisor has to see: a report arrived (a blocked one says so), a
claim went stale, a decision waits, a BLOCKED_ON signal reached the coordinator, a freeze
or a thaw, a verify result, lost work. Each has a stable id derived from the state (the
report's file name, the claim's session and opening time, the decision's id...), so
whoever computes it twice gets the same id. The outbox (`notify.json` in the state
directory) remembers every id it took, before delivering it: a restarted `coord watch`
never repeats an event, and one that could not be delivered is retried with backoff.

Delivery goes to `[notify] command` (the event as JSON on stdin, through the one door for
user commands) and to every apprise URL (`[notify] urls`, `urls_file`,
`$HUNKWISE_NOTIFY_URLS`). apprise is imported only when something is sent: it costs more
than half a second to import, and the commands agents run in loops never need it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from hunkwise.shared.output import printable
from hunkwise.shared.state import store
from hunkwise.shared.state.context import Ctx, iso, session_role

if TYPE_CHECKING:
    from hunkwise.shared.state.documents import (
        EventFacts,
        NotifyEvent,
        NotifyFailure,
        Outbox,
        OutboxEntry,
        ReportArrival,
        SendResult,
        VerifySummary,
    )
    from hunkwise.shared.state.models import State

OUTBOX = "notify.json"
VERIFICATIONS = "verifications"
MAX_SENT = 20000
MAX_BACKOFF_S = 900.0
COMMAND_TIMEOUT_S = 30.0
SUBJECT_MAX = 200
BODY_MAX = 1500
# Facts about the past rather than work waiting: when the outbox is first created, those
# already in the state are taken as known, not announced (a watcher started on a project
# at batch 7 does not report six old thaws).
HISTORY = ("freeze", "thaw", "verify")
ENV_URLS = "HUNKWISE_NOTIFY_URLS"


def _clip(text: object, n: int) -> str:
    s = " ".join(printable(str(text)).split())
    return s if len(s) <= n else s[: n - 1] + "…"


def event(kind: str, eid: str, subject: str, body: str = "", /,
          **data: Unpack[EventFacts]) -> NotifyEvent:
    return {"event": kind, "id": eid, "at": iso(time.time()), "subject": _clip(subject, SUBJECT_MAX),
            "body": printable(body)[:BODY_MAX], **data}


# ---- the events ------------------------------------------------------------------------

def report_event(summary: ReportArrival) -> NotifyEvent:
    """A report arrived; `summary` is the watcher's (task_id, status, title, file...)."""
    tid, status = summary.get("task_id", "?"), summary.get("status", "?")
    eid = f"report:{summary.get('file') or tid}"
    if status == "blocked":
        return event("blocked", eid, f"{tid} is blocked: {summary.get('reason') or summary.get('title', '')}",
                     f"{summary.get('title', '')}\nreason: {summary.get('reason') or '-'}\n"
                     f"coord next shows the report", **summary)
    checks = (f" (checks {summary['checks_passed']}/{summary['checks_total']})"
              if summary.get("checks_total") else "")
    return event("report", eid, f"{tid} reported {status}{checks}: {summary.get('title', '')}",
                 f"{summary.get('summary') or ''}\ncoord next takes it", **summary)


def for_coordinator(to: str) -> bool:
    """A signal addressed to the coordinator: its session, its role, or everyone."""
    if to == "*":
        return True
    if to.startswith("sess-"):
        return session_role(to) in ("coordinator", "coord")
    return to.partition("@")[0] in ("coordinator", "coord")


def verifications(lay: store.Layout, n: int = 5) -> list[tuple[str, dict[str, Any]]]:
    """The newest `n` verify records (name, record), newest first.

    A record is open JSON here, not a VerifyResult: it is read back from a file anyone may
    have edited, so its readers take each key with `.get` and a default."""
    d = lay.root / VERIFICATIONS
    try:
        files = sorted((p for p in d.iterdir() if p.suffix == ".json"),
                       key=lambda p: (p.stat().st_mtime, p.name), reverse=True)[:n]
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    for p in files:
        try:
            doc = json.loads(p.read_bytes())
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict):
            out.append((p.name, doc))
    return out


def last_verification(lay: store.Layout) -> VerifySummary | None:
    got = verifications(lay, 1)
    if not got:
        return None
    name, doc = got[0]
    failing = [c.get("command", "?") for c in doc.get("commands", []) if c.get("exit_code") != 0]
    return {"record": name, "ok": bool(doc.get("ok")), "commit": doc.get("commit"),
            "batch": doc.get("batch"), "at": doc.get("at"), "failing": failing,
            "problems": list(doc.get("problems", []))[:5]}


def _verify_event(name: str, doc: dict[str, Any]) -> NotifyEvent:
    commit = (doc.get("commit") or "")[:12]
    if doc.get("ok"):
        return event("verify", f"verify:{name}", f"verify passed: batch {doc.get('batch')} at {commit}",
                     "the frozen set is proven; coord thaw opens the next batch",
                     ok=True, batch=doc.get("batch"), commit=doc.get("commit"), failing=[])
    failing = [c.get("command", "?") for c in doc.get("commands", []) if c.get("exit_code") != 0]
    what = f"{failing[0]!r} failed" if failing else "; ".join(doc.get("problems", [])[:1]) or "failed"
    return event("verify", f"verify:{name}", f"verify FAILED: batch {doc.get('batch')}: {what}",
                 "\n".join(doc.get("problems", [])[:10]), ok=False, batch=doc.get("batch"),
                 commit=doc.get("commit"), failing=failing)


def collect(ctx: Ctx, *, with_lost: bool = False, now: float | None = None) -> list[NotifyEvent]:
    """Every event the state holds now (reports excepted: the watcher reads the inbox)."""
    now = now or time.time()
    state = store.load(ctx.lay)
    out: list[NotifyEvent] = []
    for t in sorted(state.tasks.values(), key=lambda t: t.id):
        c = t.claim
        if c is not None and t.stale(now):
            age = now - c.heartbeat
            out.append(event("stale-claim", f"stale:{t.id}:{c.session}:{int(c.opened)}",
                             f"claim went stale: {t.id} by {c.session}, no heartbeat for "
                             f"{age / 60:.0f} min",
                             f"{t.title}\ncoord recover {t.id} frees it for another session",
                             task_id=t.id, session=c.session, heartbeat_age_s=round(age)))
    for d in state.decisions:
        if d.state == "open":
            out.append(event("decision", f"decision:{d.id}",
                             f"decision waiting: {d.id} [{d.kind}] {d.task}: {d.question}",
                             f"{d.question}\nasked by {d.session}\n"
                             f"coord decide {d.id} --answer \"...\"",
                             decision=d.id, task_id=d.task, kind=d.kind, question=d.question,
                             session=d.session))
    for s in state.signals:
        if s.type == "BLOCKED_ON" and s.state == "pending" and for_coordinator(s.to):
            out.append(event("blocked-on", f"signal:{s.id}",
                             f"BLOCKED_ON from {s.sender}: {s.about}", s.payload,
                             signal=s.id, sender=s.sender, about=s.about, payload=s.payload))
    fz = state.freeze
    if fz is not None:
        out.append(event("freeze", f"freeze:{fz.batch}:{int(fz.at)}",
                         f"frozen: batch {fz.batch} at {(fz.commit or '')[:12]} by {fz.by}",
                         ("deferred: " + ", ".join(fz.deferred)) if fz.deferred else "",
                         batch=fz.batch, commit=fz.commit, deferred=list(fz.deferred)))
    elif state.batch > 1:
        out.append(event("thaw", f"thaw:{state.batch - 1}",
                         f"thawed: batch {state.batch} is open", batch=state.batch))
    for name, doc in reversed(verifications(ctx.lay)):
        out.append(_verify_event(name, doc))
    if with_lost:
        out += lost_events(ctx, state)
    return out


def lost_events(ctx: Ctx, state: State) -> list[NotifyEvent]:
    from hunkwise.coordinator.restore import lost_tasks
    from hunkwise.shared.hunks.taskview import active_tasks, view

    if not any(t.active and t.saved is not None for t in state.tasks.values()):
        return []  # nothing recorded, nothing to lose: spare the tree view
    tv = view(ctx.repo, active_tasks(state))
    out: list[NotifyEvent] = []
    for lost in lost_tasks(ctx, list(state.tasks.values()), tv):
        tid, paths = lost["task"], sorted(lost["paths"])
        t = state.tasks.get(tid)
        rev = t.saved.revision if t is not None and t.saved is not None else 0
        digest = hashlib.sha256("\0".join(paths).encode()).hexdigest()[:12]
        out.append(event("lost", f"lost:{tid}:{rev}:{digest}",
                         f"lost work: {tid}'s changes are gone from {', '.join(paths[:3])}"
                         + (f" (+{len(paths) - 3})" if len(paths) > 3 else ""),
                         f"coord restore {tid} puts them back", task_id=tid, paths=paths))
    return out


# ---- where they go -----------------------------------------------------------------------

_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


def expand(url: str, env: dict[str, str] | None = None) -> str:
    """`$VAR` and `${VAR}` from the environment; an unset one is an error (a URL with a
    hole in it would reach the wrong place or leak the rest)."""
    values: Mapping[str, str] = os.environ if env is None else env

    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name not in values:
            raise KeyError(name)
        return values[name]

    return _VAR.sub(sub, url)


def _split(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            out += [u for u in re.split(r"[\s,]+", line) if u]
    return out


def configured_urls(ctx: Ctx) -> tuple[list[str], list[str]]:
    """(urls as written, problems): from coord.toml, `urls_file`, `$HUNKWISE_NOTIFY_URLS`.

    A `urls_file` inside the working tree is refused: that is where secrets get committed.
    """
    cfg = ctx.config.notify
    urls = list(cfg.urls)
    problems = []
    if cfg.urls_file:
        p = Path(os.path.expanduser(expand(cfg.urls_file, {**os.environ})))
        if not p.is_absolute():
            problems.append(f"[notify] urls_file {cfg.urls_file!r}: give an absolute path "
                            "outside the repository")
        else:
            real, top = os.path.realpath(p), os.path.realpath(ctx.repo)
            if os.path.commonpath([real, top]) == top:
                problems.append(f"[notify] urls_file {cfg.urls_file!r} lies inside the "
                                "repository; keep secrets outside it")
            else:
                try:
                    urls += _split(p.read_text(encoding="utf-8"))
                except (OSError, UnicodeDecodeError) as e:
                    problems.append(f"[notify] urls_file {cfg.urls_file!r}: {e}")
    urls += _split(os.environ.get(ENV_URLS, ""))
    return urls, problems


def sink_name(url: str) -> str:
    """A URL's name in records: its scheme and a digest, never its secrets."""
    scheme = url.split("://", 1)[0] if "://" in url else "?"
    return f"url:{scheme}:{hashlib.sha256(url.encode()).hexdigest()[:8]}"


def send_url(url: str, subject: str, body: str) -> str | None:
    """Deliver through apprise; None when delivered, else why not (secrets left out)."""
    try:
        real = expand(url)
    except KeyError as e:
        return f"environment variable {e.args[0]} is not set"
    import logging

    import apprise

    try:
        asset = apprise.AppriseAsset(storage_mode="memory")
    except TypeError:  # an apprise without persistent storage
        asset = apprise.AppriseAsset()
    ap = apprise.Apprise(asset=asset)
    if not ap.add(real):
        return "not a URL apprise knows"
    with apprise.LogCapture(level=logging.WARNING) as log:  # type: ignore[no-untyped-call]
        ok = ap.notify(title=subject, body=body or subject)
    if ok:
        return None
    text = log.getvalue().strip().splitlines() if hasattr(log, "getvalue") else []
    why = text[-1].split(" - ", 2)[-1] if text else "delivery failed"
    return why.replace(real, "<url>")[:300]


def send_command(ctx: Ctx, cmd: str, ev: NotifyEvent) -> str | None:
    from hunkwise.shared.proc import run_command

    try:
        ran = run_command(cmd, ctx.repo, COMMAND_TIMEOUT_S,
                          stdin=json.dumps(ev).encode(), tail_lines=5)
    except OSError as e:
        return str(e)[:200]
    if ran.passed:
        return None
    why = "timed out" if ran.exit_code == 124 else f"exit {ran.exit_code}"
    tail = ran.tail[-1] if ran.tail else ""
    return f"{why}{': ' + tail[:200] if tail else ''}"


# ---- the outbox ------------------------------------------------------------------------------

def _load(lay: store.Layout) -> Outbox | None:
    doc: Any
    try:
        doc = json.loads((lay.root / OUTBOX).read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        doc = {}  # torn by hand: start over, but never announce history again
    if not isinstance(doc, dict):
        doc = {}
    doc.setdefault("sent", {})
    doc.setdefault("pending", {})
    outbox: Outbox = doc  # only this module writes it
    return outbox


def _save(lay: store.Layout, doc: Outbox) -> None:
    sent = doc["sent"]
    if len(sent) > MAX_SENT:
        doc["sent"] = dict(sorted(sent.items(), key=lambda kv: kv[1])[-MAX_SENT:])
    store.ensure(lay)
    store.atomic_write(lay.root / OUTBOX, json.dumps(doc, indent=0).encode())


class Notifier:
    """Takes events once (persisted first), delivers them, retries failures with backoff."""

    def __init__(self, ctx: Ctx, *, say: Callable[[str], None] | None = None) -> None:
        self.ctx = ctx
        self.say = say or (lambda _line: None)
        self.delivered: list[NotifyEvent] = []
        self.failures: list[NotifyFailure] = []

    def _sinks(self) -> list[str]:
        sinks = ["command"] if self.ctx.config.notify.command else []
        urls, problems = configured_urls(self.ctx)
        for p in problems:
            self._record("notify-config", "[notify]", p)
        return sinks + [sink_name(u) for u in urls]

    def _record(self, kind: str, path: str, detail: str) -> None:
        from hunkwise.shared.state import events

        events.append(self.ctx.lay, kind, path, detail)
        self.say(f"event: {kind}: {path} ({detail})")

    def offer(self, events: list[NotifyEvent]) -> list[NotifyEvent]:
        """Take the events not seen before; return them. Nothing is sent here."""
        lay = self.ctx.lay
        with store.locked(lay, name="notify"):
            doc = _load(lay)
            first = doc is None
            if doc is None:
                doc = {"sent": {}, "pending": {}}
            new = [e for e in events if e["id"] not in doc["sent"] and e["id"] not in doc["pending"]]
            if not new and not first:
                return []
            sinks = self._sinks() if new else []
            taken = []
            now = time.time()
            for e in new:
                if first and e["event"] in HISTORY:
                    doc["sent"][e["id"]] = now  # known before the outbox existed
                    continue
                doc["pending"][e["id"]] = {"event": e, "sinks": list(sinks), "attempts": 0,
                                           "next_at": 0.0, "errors": []}
                taken.append(e)
            _save(lay, doc)
        return taken

    def next_due(self) -> float | None:
        doc = _load(self.ctx.lay)
        if not doc or not doc["pending"]:
            return None
        return min(float(p["next_at"]) for p in doc["pending"].values())

    def deliver_due(self, now: float | None = None) -> int:
        """Deliver what is due; return how many events were completed."""
        lay = self.ctx.lay
        now = time.time() if now is None else now
        doc = _load(lay)
        if not doc or not any(p["next_at"] <= now for p in doc["pending"].values()):
            return 0
        cfg = self.ctx.config.notify
        urls, _problems = configured_urls(self.ctx)
        by_name = {sink_name(u): u for u in urls}
        done = 0
        with store.locked(lay, name="notify"):
            doc = _load(lay) or {"sent": {}, "pending": {}}
            for eid, entry in list(doc["pending"].items()):
                if entry["next_at"] > now:
                    continue
                ev = entry["event"]
                left, errors = [], []
                for sink in entry["sinks"]:
                    if sink == "command":
                        why = send_command(self.ctx, cfg.command, ev) if cfg.command else None
                    elif sink in by_name:
                        why = send_url(by_name[sink], ev["subject"], ev.get("body", ""))
                    else:
                        why = None  # no longer configured
                    if why is not None:
                        left.append(sink)
                        errors.append(f"{sink}: {why}")
                self.say(f"notify: {ev['event']}: {ev['subject']}")
                if not left:
                    del doc["pending"][eid]
                    doc["sent"][eid] = now
                    self.delivered.append(ev)
                    done += 1
                    continue
                entry["attempts"] += 1
                entry["sinks"] = left
                entry["errors"] = errors[-5:]
                if entry["attempts"] >= cfg.max_attempts:
                    del doc["pending"][eid]
                    doc["sent"][eid] = now
                    self._record("notify-gave-up", eid, "; ".join(errors)
                                 + f" (after {entry['attempts']} attempts)")
                else:
                    wait = min(MAX_BACKOFF_S, cfg.retry_seconds * 2 ** (entry["attempts"] - 1))
                    entry["next_at"] = now + wait
                    self._record("notify-failed", eid, "; ".join(errors)
                                 + f"; retry in {wait:g}s (attempt {entry['attempts']}"
                                 f"/{cfg.max_attempts})")
                self.failures.append({"id": eid, "errors": errors, "attempts": entry["attempts"]})
            _save(lay, doc)
        return done

    def pending(self) -> dict[str, OutboxEntry]:
        doc = _load(self.ctx.lay)
        return dict(doc["pending"]) if doc else {}


def send_now(ctx: Ctx, subject: str, body: str, kind: str = "brief") -> SendResult:
    """Send one message at once to every notifier (the brief, on demand); not queued."""
    ev = event(kind, f"{kind}:{time.time_ns()}", subject, body)
    errors = []
    if ctx.config.notify.command:
        why = send_command(ctx, ctx.config.notify.command, ev)
        if why:
            errors.append(f"command: {why}")
    urls, problems = configured_urls(ctx)
    errors += problems
    for u in urls:
        why = send_url(u, subject, body)
        if why:
            errors.append(f"{sink_name(u)}: {why}")
    sent_to = (1 if ctx.config.notify.command else 0) + len(urls)
    return {"sent_to": sent_to, "errors": errors}
