"""The board's one renderer: the state document (`board.board_state`) as HTML.

Every value shown goes through `e` (HTML-escaped, quotes included), so a worker-written
title, question or payload can never become markup; the page around the board is the
static `board.html`, filled by `page_template` and `Board.page`.
"""

from __future__ import annotations

import html
from importlib import resources
from typing import TYPE_CHECKING

from hunkwise.shared.state.context import iso

if TYPE_CHECKING:
    from hunkwise.shared.state.documents import BoardState, BoardTask


def e(value: object) -> str:
    """Every value shown is escaped, quotes included (it may land in an attribute)."""
    return html.escape("" if value is None else str(value), quote=True)


def _since(at: str) -> str:
    """A moment the page shows as an age ("12s", "5m"): the page's script counts it from
    `data-at` every second, so the fragment itself never changes with the clock and an
    unchanged board answers a poll with 304. Without the script it reads as the time."""
    return f'<time class="age" datetime="{e(at)}" data-at="{e(at)}">{e(at)}</time>'


def _table(cls: str, header: list[str], rows: list[list[str]], empty: str,
           attrs: list[str] | None = None) -> str:
    """`attrs`: per row, attributes for its <tr> (already escaped)."""
    if not rows:
        return f'<p class="empty">{e(empty)}</p>'
    head = "".join(f"<th>{e(h)}</th>" for h in header)
    body = "".join(f"<tr{a}>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>"
                   for r, a in zip(rows, attrs or [""] * len(rows), strict=True))
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


ORDER = ["in_progress", "reported", "changes_requested", "assigned", "deferred", "accepted",
         "rejected", "reverted"]


LABELS = {"in_progress": "in progress", "reported": "reported: waiting for review",
          "changes_requested": "changes requested", "assigned": "assigned, not started"}


def _badges(t: BoardTask, batch: int, asked: set[str]) -> str:
    """Small marks after a task's title: its report's status, a decision it waits on,
    its commit, a batch other than the current one."""
    out = []
    if t["state"] == "reported" and t.get("last_status"):
        st = str(t["last_status"])
        out.append(f'<span class="badge st-{e(st)}">{e(st)}</span>')
    if t["id"] in asked:
        out.append('<span class="badge ask">decision waiting</span>')
    if t.get("commit"):
        out.append(f'<span class="badge commit"><code>{e(str(t["commit"])[:10])}</code></span>')
    if t["batch"] != batch:
        out.append(f'<span class="badge">batch {e(t["batch"])}</span>')
    return (" " + " ".join(out)) if out else ""


def _agent_cell(t: BoardTask) -> str:
    """A launched agent: running, or exited without a report with its log's tail."""
    a = t.get("agent")
    if not a:
        return ""
    if a["problem"]:
        return (f'<br><b class="stale-mark">{e(a["problem"])}</b> ({e(a["agent"])}, pid '
                f'{e(a["pid"])})<pre class="log-tail">{e(a["log_tail"])}</pre>')
    return f'<br><span class="live">agent {e(a["agent"])}: {e(a["state"])}</span>'


def render(doc: BoardState, csrf: str) -> str:
    """The board's HTML (without the page around it). Cells are escaped by `e` alone."""
    # Decisions first, after the summary: they are what the supervisor is here for.
    out = [_summary(doc), _decisions(doc, csrf), _freeze(doc), _tasks(doc)]
    # Inbox, signals, lost work, events.
    rows = [[e(r["task_id"]), e(f'r{r["revision"]}'), e(r["kind"] or "task"),
             e(r["status"]), e(r["title"]), _since(r["delivered"])] for r in doc["inbox"]["queue"]]
    out.append('<section id="inbox"><h2>Inbox queue</h2>'
               + _table("inbox", ["task", "rev", "kind", "status", "title", "age"], rows,
                        "inbox empty") + "</section>")
    rows = [[e(s["id"]), e(s["from"]), e(s["to"]) + (" ★" if s["for_coordinator"] else ""),
             e(s["type"]), e(s["about"]), e(s["payload"])] for s in doc["signals"]]
    out.append('<section id="signals"><h2>Pending signals</h2>'
               + _table("signals", ["id", "from", "to", "type", "about", "payload"], rows,
                        "no pending signals") + "</section>")
    rows = [[e(lost["task"]), e(", ".join(lost["paths"])), f'<code>coord restore {e(lost["task"])}</code>']
            for lost in doc["lost"]]
    out.append('<section id="lost"><h2>Lost work</h2>'
               + _table("lost", ["task", "paths", "to bring it back"], rows, "none") + "</section>")
    rows = [[e(ev.get("at")), e(ev.get("kind")), e(ev.get("path")), e(ev.get("detail"))]
            for ev in reversed(doc["events"])]
    out.append('<section id="events"><h2>Recent events</h2>'
               + _table("events", ["at", "kind", "path", "detail"], rows, "none") + "</section>")
    return "\n".join(out)


def _summary(doc: BoardState) -> str:
    """At a glance: what waits, what went stale, what was lost."""
    waiting = len(doc["decisions"])
    stale = sum(1 for t in doc["tasks"] if t["claim"] and t["claim"]["stale"])
    exited = sum(1 for t in doc["tasks"] if (t.get("agent") or {}).get("problem"))

    def pill(alert: bool, n: int, one: str, many: str) -> str:
        return (f'<li class="pill{" alert" if alert else ""}"><b>{e(n)}</b> '
                f'{e(one if n == 1 else many)}</li>')

    return ('<section class="summary"><h2>At a glance</h2><ul>'
            + pill(bool(waiting), waiting, "decision waiting", "decisions waiting")
            + pill(bool(stale), stale, "stale claim", "stale claims")
            + (pill(True, exited, "agent exited without a report",
                    "agents exited without a report") if exited else "")
            + pill(False, doc["inbox"]["pending"], "report in the inbox", "reports in the inbox")
            + pill(bool(doc["lost"]), len(doc["lost"]), "task with lost work", "tasks with lost work")
            + pill(False, doc["interventions"], "intervention this batch",
                   "interventions this batch")
            + f'<li class="meta">repo <b>{e(doc["repo"])}</b>, batch {e(doc["batch"])}'
            '</li></ul></section>')


def _decisions(doc: BoardState, csrf: str) -> str:
    """The decisions waiting, each with a form to answer it."""
    rows, dattrs = [], []
    for d in doc["decisions"]:
        form = (f'<form class="decide" method="post" action="decide" data-dec="{e(d["id"])}">'
                f'<input type="hidden" name="csrf" value="{e(csrf)}">'
                f'<input type="hidden" name="decision" value="{e(d["id"])}">'
                f'<input name="answer" required maxlength="4000" placeholder="one sentence" '
                f'aria-label="answer to {e(d["id"])}"><button type="submit">Answer</button></form>')
        rows.append([e(d["id"]), e(d["task"]), e(d["kind"]), e(d["question"]), e(d["session"]), form])
        dattrs.append(f' data-dec="{e(d["id"])}"')
    return ('<section id="decisions"><h2>Decisions waiting</h2>'
            + _table("decisions", ["id", "task", "kind", "question", "asked by", "answer"],
                     rows, "no decision waits", dattrs) + "</section>")


def _freeze(doc: BoardState) -> str:
    """The freeze in force, and the last verify."""
    fz = doc["freeze"]
    v = doc["verify"]
    if fz:
        frz = (f'<p class="alert">frozen: batch {e(fz["batch"])} at <code>{e((fz["commit"] or "")[:12])}</code> '
               f'by {e(fz["by"])} since {e(iso(fz["at"]))}'
               + (f'; deferred {e(", ".join(fz["deferred"]))}' if fz["deferred"] else "") + "</p>")
    else:
        frz = "<p>not frozen</p>"
    if v:
        mark = "pass" if v["ok"] else "FAIL"
        ver = (f'<p class="{"ok" if v["ok"] else "alert"}">last verify: <b>{mark}</b>, batch '
               f'{e(v["batch"])} at <code>{e((v["commit"] or "")[:12])}</code>, {e(v["at"])}'
               + "".join(f"<br>failing: <code>{e(c)}</code>" for c in v["failing"])
               + "".join(f"<br>problem: {e(p)}" for p in v["problems"] if not v["ok"]) + "</p>")
    else:
        ver = "<p>no verify recorded</p>"
    return f'<section id="freeze"><h2>Freeze and verify</h2>{frz}{ver}</section>'


def _tasks(doc: BoardState) -> str:
    """The tasks, grouped by state in the order work moves."""
    by_state: dict[str, list[BoardTask]] = {}
    for t in doc["tasks"]:
        by_state.setdefault(t["state"], []).append(t)
    asked = {d["task"] for d in doc["decisions"]}
    parts = []
    for st in sorted(by_state, key=lambda s: ORDER.index(s) if s in ORDER else 99):
        rows, attrs = [], []
        for t in by_state[st]:
            c = t["claim"]
            claim = "-" if c is None else (
                f'<span class="{"stale" if c["stale"] else "live"}">heartbeat '
                f'{_since(c["heartbeat"])}'
                + (' · <b class="stale-mark">STALE</b>' if c["stale"] else "")
                + (f'<br>{e(c["session"])}' if c["session"] != t["session"] else "") + "</span>")
            claim += _agent_cell(t)
            rows.append([f'<b>{e(t["id"])}</b>', e(t["title"]) + _badges(t, doc["batch"], asked),
                         "<br>".join(f"<code>{e(g)}</code>" for g in t["grants"]),
                         f'<span class="sess">{e(t["session"] or t["reserved_for"] or "-")}</span>',
                         claim])
            tint = " stale-row" if (c and c["stale"]) or (t.get("agent") or {}).get("problem") else ""
            attrs.append(f' data-task="{e(t["id"])}" data-state="{e(st)}" class="state-{e(st)}{tint}"')
        parts.append(f'<h3 class="state state-{e(st)}">{e(LABELS.get(st, st))} '
                     f'<span class="count">{len(by_state[st])}</span></h3>'
                     + _table("tasks", ["task", "title", "grants", "session", "claim"],
                              rows, "", attrs))
    return ('<section id="tasks"><h2>Tasks</h2>' + ("".join(parts) or '<p class="empty">no tasks</p>')
            + "</section>")


def page_template() -> str:
    return resources.files("hunkwise.coordinator").joinpath("board.html").read_text("utf-8")
