"""The board's one renderer: the state document (`board.board_state`) as HTML.

Every value shown goes through `e` (HTML-escaped, quotes included), so a worker-written
title, question or payload can never become markup; the page around the board is the
static `board.html`, filled by `page_template` and `Board.page`.
"""

from __future__ import annotations

import html
from importlib import resources
from typing import Any

from hunkwise.shared.context import iso


def e(value: object) -> str:
    """Every value shown is escaped, quotes included (it may land in an attribute)."""
    return html.escape("" if value is None else str(value), quote=True)


def _age(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s:.0f}s" if s < 120 else (f"{s / 60:.0f}m" if s < 7200 else f"{s / 3600:.1f}h")


def _table(cls: str, header: list[str], rows: list[list[str]], empty: str,
           attrs: list[str] | None = None) -> str:
    """`attrs`: per row, attributes for its <tr> (already escaped)."""
    if not rows:
        return f'<p class="empty">{e(empty)}</p>'
    head = "".join(f"<th>{e(h)}</th>" for h in header)
    body = "".join(f"<tr{a}>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>"
                   for r, a in zip(rows, attrs or [""] * len(rows)))
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


ORDER = ["in_progress", "reported", "changes_requested", "assigned", "deferred", "accepted",
         "rejected", "reverted"]


def render(doc: dict[str, Any], csrf: str) -> str:
    """The board's HTML (without the page around it). Cells are escaped by `e` alone."""
    out: list[str] = []
    fz = doc["freeze"]
    v = doc["verify"]
    waiting = len(doc["decisions"])
    stale = sum(1 for t in doc["tasks"] if t["claim"] and t["claim"]["stale"])
    out.append('<section class="summary"><h2>At a glance</h2><ul>'
               f'<li>repo <b>{e(doc["repo"])}</b>, batch {e(doc["batch"])}, as of {e(doc["at"])}</li>'
               f'<li class="{"alert" if waiting else ""}">decisions waiting: <b>{waiting}</b> '
               f'(interventions this batch: {e(doc["interventions"])})</li>'
               f'<li class="{"alert" if stale else ""}">stale claims: <b>{stale}</b></li>'
               f'<li>inbox: <b>{e(doc["inbox"]["pending"])}</b> pending</li>'
               f'<li class="{"alert" if doc["lost"] else ""}">lost work: <b>{len(doc["lost"])}</b></li>'
               "</ul></section>")
    # Decisions first: they are what the supervisor is here for.
    rows, dattrs = [], []
    for d in doc["decisions"]:
        form = (f'<form class="decide" method="post" action="decide" data-dec="{e(d["id"])}">'
                f'<input type="hidden" name="csrf" value="{e(csrf)}">'
                f'<input type="hidden" name="decision" value="{e(d["id"])}">'
                f'<input name="answer" required maxlength="4000" placeholder="one sentence" '
                f'aria-label="answer to {e(d["id"])}"><button type="submit">Answer</button></form>')
        rows.append([e(d["id"]), e(d["task"]), e(d["kind"]), e(d["question"]), e(d["session"]), form])
        dattrs.append(f' data-dec="{e(d["id"])}"')
    out.append('<section id="decisions"><h2>Decisions waiting</h2>'
               + _table("decisions", ["id", "task", "kind", "question", "asked by", "answer"],
                        rows, "no decision waits", dattrs) + "</section>")
    # Freeze and verify.
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
    out.append(f'<section id="freeze"><h2>Freeze and verify</h2>{frz}{ver}</section>')
    # Tasks by state.
    by_state: dict[str, list[dict[str, Any]]] = {}
    for t in doc["tasks"]:
        by_state.setdefault(t["state"], []).append(t)
    parts = []
    for st in sorted(by_state, key=lambda s: ORDER.index(s) if s in ORDER else 99):
        rows, attrs = [], []
        for t in by_state[st]:
            c = t["claim"]
            claim = "-" if c is None else (
                f'<span class="{"stale" if c["stale"] else "live"}">{e(c["session"])} · '
                f'heartbeat {e(_age(c["heartbeat_age_s"]))} ago'
                + (' · <b class="stale-mark">STALE</b>' if c["stale"] else "") + "</span>")
            rows.append([f'<b>{e(t["id"])}</b>', e(t["title"]), e(t["batch"]),
                         "<br>".join(f"<code>{e(g)}</code>" for g in t["grants"]),
                         e(t["session"] or t["reserved_for"] or "-"), claim])
            stale = " stale-row" if c and c["stale"] else ""
            attrs.append(f' data-task="{e(t["id"])}" data-state="{e(st)}" class="state-{e(st)}{stale}"')
        parts.append(f'<h3 class="state-{e(st)}">{e(st)} ({len(by_state[st])})</h3>'
                     + _table("tasks", ["task", "title", "batch", "grants", "session", "claim"],
                              rows, "", attrs))
    out.append('<section id="tasks"><h2>Tasks</h2>' + ("".join(parts) or '<p class="empty">no tasks</p>')
               + "</section>")
    # Inbox, signals, lost work, events.
    rows = [[e(r["task_id"]), e(f'r{r["revision"]}'), e(r["kind"] or "task"),
             e(r["status"]), e(r["title"]), e(_age(r["age_s"]))] for r in doc["inbox"]["queue"]]
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


def page_template() -> str:
    return resources.files("hunkwise.coordinator").joinpath("board.html").read_text("utf-8")
