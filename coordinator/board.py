"""`coord board`: a live page of the state, served on loopback.

The stack is the standard library's `http.server` (`ThreadingHTTPServer`): a board is a
handful of GET routes and one POST, for one supervisor and a few viewers on loopback, and
a web framework would add dependencies and start-up time for nothing. The page is one
static file (`board.html`) with plain JavaScript, no build step: it polls `fragment`
every second with `If-None-Match` (an unchanged board costs a 304) and swaps the HTML in.

One thread refreshes the board from the state (the same reads as the CLI) twice a second,
and the tree-wide lost-work check every ten; requests only serve what it rendered, so
viewers never load the state themselves. The only write is answering a decision, through
`decisions.decide`, the core function of `coord decide` (it counts the intervention). Every
value a worker wrote is HTML-escaped in the one renderer, `board_render`.

Safety: loopback by default, with the Host header checked (a DNS-rebinding page cannot
read or post); another address needs an access token (header, cookie or `?token=`).
A POST needs the page's CSRF token and a same-origin Origin when one is sent.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import secrets
import sys
import threading
import time
from collections.abc import Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from hunkwise.coordinator.board_render import e, page_template, render
from hunkwise.shared.errors import CoordError, UsageError
from hunkwise.shared.state import store
from hunkwise.shared.state.context import Ctx, iso

if TYPE_CHECKING:
    from pathlib import Path

    from hunkwise.shared.state.documents import (
        BoardSignal,
        BoardState,
        BoardTask,
        DecideResult,
        LostWork,
        QueueRow,
        ReportHead,
        ServeResult,
    )

REFRESH_S = 0.5
LOST_EVERY_S = 10.0
MAX_BODY = 64 * 1024
MAX_INBOX_READ = 100
COOKIE = "hunkwise_board"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


# ---- the board's data ------------------------------------------------------------------------

_heads: dict[str, ReportHead] = {}


def _report_head(path: Path) -> ReportHead:
    """status, title, kind of a pending report: read once per file (names never repeat)."""
    got = _heads.get(path.name)
    if got is None:
        try:
            doc = store.strict_json_loads(path.read_bytes())
        except (OSError, ValueError):
            doc = {}
        doc = doc if isinstance(doc, dict) else {}

        def text(key: str) -> str:
            return str(doc.get(key) or "")[:500]
        got = {"status": text("status"), "title": text("title"), "kind": text("kind"),
               "reason": text("reason")}
        if len(_heads) > 5000:
            _heads.clear()
        _heads[path.name] = got
    return got


def board_state(ctx: Ctx, *, lost: list[LostWork] | None = None,
                now: float | None = None) -> BoardState:
    """Everything the page shows, as JSON (also served at `state.json`)."""
    from hunkwise import inbox
    from hunkwise.coordinator.launch import status_of
    from hunkwise.coordinator.notify import for_coordinator, last_verification
    from hunkwise.shared.state import events

    now = now or time.time()
    state = store.load(ctx.lay)
    tasks: list[BoardTask] = []
    for t in sorted(state.tasks.values(), key=lambda t: t.id):
        if not t.active and t.batch < state.batch:
            continue
        c = t.claim
        tasks.append({**t.public(), "last_status": t.last_status, "claim": None if c is None else {
            "session": c.session, "opened": iso(c.opened), "heartbeat": iso(c.heartbeat),
            "heartbeat_age_s": round(now - c.heartbeat),
            "ttl": c.ttl, "stale": t.stale(now)},
            # its launched agent (coordinator/launch.py), or None
            "agent": status_of(t) if t.launch is not None else None})
    pending, _odd = inbox.entries(ctx.lay.inbox, "new")
    queue: list[QueueRow] = []
    for ent in pending[:MAX_INBOX_READ]:
        head = _report_head(ent.path)
        queue.append({"task_id": ent.task_id, "revision": ent.revision, "file": ent.name,
                      "delivered": iso(ent.time_ns / 1e9), "age_s": round(now - ent.time_ns / 1e9),
                      **head})
    signals: list[BoardSignal] = [
        {**s.public(), "for_coordinator": for_coordinator(s.to)}
        for s in state.signals if s.state == "pending"]
    decisions = [d.public() for d in state.decisions if d.state == "open"]
    return {
        "at": iso(now),
        "repo": ctx.repo.name,
        "batch": state.batch,
        "tasks": tasks,
        "inbox": {"pending": len(pending), "queue": queue},
        "signals": signals,
        "decisions": decisions,
        "interventions": state.interventions.get(str(state.batch), 0),
        "freeze": state.freeze.public() if state.freeze else None,
        "verify": last_verification(ctx.lay),
        "lost": lost or [],
        "events": events.recent(ctx.lay, 10),
    }


def _lost(ctx: Ctx) -> list[LostWork]:
    from hunkwise.coordinator.restore import lost_tasks
    from hunkwise.shared.hunks.taskview import active_tasks, view

    state = store.load(ctx.lay)
    if not any(t.active and t.saved is not None for t in state.tasks.values()):
        return []
    return lost_tasks(ctx, list(state.tasks.values()), view(ctx.repo, active_tasks(state)))


# ---- the server ----------------------------------------------------------------------------------

class Board:
    """The rendered board, refreshed by one thread; requests read it."""

    def __init__(self, ctx: Ctx, token: str | None) -> None:
        self.ctx = ctx
        self.token = token
        self.csrf = secrets.token_urlsafe(32)
        self.requests = 0
        self.template = page_template()
        self._lock = threading.Lock()
        self._doc: Mapping[str, Any] = {}  # a BoardState once rendered
        self._html = ""
        self._etag = '""'
        self._lost: list[LostWork] = []
        self._lost_at = -1e9
        self._stop = threading.Event()
        self.error: str | None = None
        self.refresh(with_lost=True)

    def refresh(self, *, with_lost: bool = False) -> None:
        if with_lost:
            try:
                self._lost = _lost(self.ctx)
                self.error = None
            except CoordError as err:
                self.error = err.message
            self._lost_at = time.monotonic()
        try:
            doc = board_state(self.ctx, lost=self._lost)
        except CoordError as err:
            self.error = err.message
            return
        if self.error:
            doc["error"] = self.error
        body = render(doc, self.csrf)
        if self.error:
            body = f'<p class="alert">{e(self.error)}</p>' + body
        etag = '"' + hashlib.sha256(body.encode()).hexdigest()[:20] + '"'
        with self._lock:
            self._doc, self._html, self._etag = doc, body, etag

    def snapshot(self) -> tuple[Mapping[str, Any], str, str]:
        with self._lock:
            return self._doc, self._html, self._etag

    def run_refresher(self) -> None:
        while not self._stop.wait(REFRESH_S):
            try:
                self.refresh(with_lost=time.monotonic() - self._lost_at >= LOST_EVERY_S)
            except Exception as err:  # noqa: BLE001 - the board outlives one bad read
                self.error = f"{type(err).__name__}: {err}"

    def stop(self) -> None:
        self._stop.set()

    def page(self) -> tuple[str, str]:
        """The whole page and the nonce its script and style carry (for the CSP)."""
        _doc, body, etag = self.snapshot()
        nonce = secrets.token_urlsafe(16)
        return (self.template.replace("{{CSRF}}", e(self.csrf)).replace("{{ETAG}}", e(etag))
                .replace("{{NONCE}}", nonce).replace("{{REPO}}", e(self.ctx.repo.name))
                .replace("{{BOARD}}", body)), nonce

    def decide(self, decision: str, answer: str) -> DecideResult:
        from hunkwise.coordinator import decisions

        doc = decisions.decide(self.ctx, decision, answer)
        self.refresh()
        return doc


class _Handler(BaseHTTPRequestHandler):
    """The board's requests (a page, its fragment, its JSON, a decision's answer), behind
    the Host and token gates. `_handler` makes one for a board."""

    board: Board
    loopback: bool

    server_version = "hunkwise-board"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass  # quiet: stderr carries the readiness line and errors only

    # ---- gates ----
    def _host_ok(self) -> bool:
        if not self.loopback:
            return True
        host = (self.headers.get("Host") or "").strip()
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        return name.strip("[]").lower() in ("127.0.0.1", "localhost", "::1") or (
            is_loopback(name.strip("[]")))

    def _token_ok(self, query: dict[str, list[str]]) -> bool:
        if self.board.token is None:
            return True
        given = [self.headers.get("X-Board-Token", ""), *query.get("token", [])]
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            given.append(auth[7:])
        for part in (self.headers.get("Cookie") or "").split(";"):
            k, _, val = part.strip().partition("=")
            if k == COOKIE:
                given.append(val)
        want = self.board.token.encode()
        return any(hmac.compare_digest(g.encode(), want) for g in given if g)

    def _send(self, code: int, body: bytes, ctype: str, extra: dict[str, str] | None = None,
              nonce: str = "") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("X-Frame-Options", "DENY")
        self.send_header("Content-Security-Policy",
                         f"default-src 'none'; script-src 'nonce-{nonce}'; "
                         f"style-src 'nonce-{nonce}'; connect-src 'self'; form-action 'self'; "
                         "frame-ancestors 'none'; base-uri 'none'")
        for k, val in (extra or {}).items():
            self.send_header(k, val)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, code: int, doc: Mapping[str, Any]) -> None:
        self._send(code, json.dumps(doc, default=str).encode(), "application/json")

    def _gate(self) -> dict[str, list[str]] | None:
        self.board.requests += 1
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        if not self._host_ok():
            self._json(HTTPStatus.FORBIDDEN, {"error": "unexpected Host header"})
            return None
        if not self._token_ok(query):
            self._json(HTTPStatus.UNAUTHORIZED, {"error": "access token required"})
            return None
        return query

    # ---- routes ----
    def do_GET(self) -> None:  # noqa: N802
        query = self._gate()
        if query is None:
            return
        route = urlsplit(self.path).path
        if route in ("/", "/index.html"):
            extra = {}
            if self.board.token and query.get("token"):
                extra["Set-Cookie"] = f"{COOKIE}={self.board.token}; HttpOnly; SameSite=Strict; Path=/"
            text, nonce = self.board.page()
            self._send(HTTPStatus.OK, text.encode(), "text/html; charset=utf-8", extra, nonce)
        elif route == "/fragment":
            _doc, body, etag = self.board.snapshot()
            if self.headers.get("If-None-Match") == etag:
                self.send_response(HTTPStatus.NOT_MODIFIED)
                self.send_header("ETag", etag)
                self.end_headers()
                return
            self._send(HTTPStatus.OK, body.encode(), "text/html; charset=utf-8", {"ETag": etag})
        elif route == "/state.json":
            doc, _body, _etag = self.board.snapshot()
            self._json(HTTPStatus.OK, doc)
        else:
            self._json(HTTPStatus.NOT_FOUND, {"error": "not found"})

    do_HEAD = do_GET

    def do_POST(self) -> None:  # noqa: N802
        if self._gate() is None:
            return
        if urlsplit(self.path).path != "/decide":
            self._json(HTTPStatus.NOT_FOUND, {"error": "not found"})
            return
        origin = self.headers.get("Origin")
        if origin and urlsplit(origin).netloc != self.headers.get("Host"):
            self._json(HTTPStatus.FORBIDDEN, {"error": "cross-origin request refused"})
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 < length <= MAX_BODY:
            self._json(HTTPStatus.BAD_REQUEST, {"error": "body missing or too large"})
            return
        raw = self.rfile.read(length)
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        form = ctype == "application/x-www-form-urlencoded"
        try:
            if form:
                q = parse_qs(raw.decode("utf-8"), keep_blank_values=True)
                data = {k: v[0] for k, v in q.items()}
            elif ctype == "application/json":
                data = json.loads(raw)
            else:
                raise ValueError("send JSON or a form")
            if not isinstance(data, dict):
                raise ValueError("a JSON object is expected")
        except (ValueError, UnicodeDecodeError) as err:
            self._json(HTTPStatus.BAD_REQUEST, {"error": str(err)[:200]})
            return
        csrf = self.headers.get("X-CSRF-Token") or str(data.get("csrf") or "")
        if not hmac.compare_digest(csrf.encode(), self.board.csrf.encode()):
            self._json(HTTPStatus.FORBIDDEN, {"error": "missing or wrong CSRF token"})
            return
        decision, answer = str(data.get("decision") or ""), str(data.get("answer") or "")
        try:
            doc = self.board.decide(decision, answer)
        except CoordError as err:
            self._json(HTTPStatus.CONFLICT if err.exit_code == 3 else HTTPStatus.BAD_REQUEST,
                       {"error": err.message, "code": err.exit_code})
            return
        if form:
            self._send(HTTPStatus.SEE_OTHER, b"", "text/plain", {"Location": "./"})
        else:
            self._json(HTTPStatus.OK, doc)



def _handler(board: Board, loopback: bool) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        pass

    Handler.board = board
    Handler.loopback = loopback
    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class _Server6(_Server):
    import socket as _socket

    address_family = _socket.AF_INET6


class Running:
    """A board being served: `url`, and `stop()`."""

    def __init__(self, ctx: Ctx, host: str, port: int, token: str | None) -> None:
        if not is_loopback(host) and not token:
            raise UsageError(f"--host {host} listens beyond this machine: give --token "
                             "(or HUNKWISE_BOARD_TOKEN), which every request must carry")
        if token is not None and len(token) < 16:
            raise UsageError("--token: use at least 16 characters (python3 -c "
                             "'import secrets; print(secrets.token_urlsafe())')")
        self.board = Board(ctx, token)
        cls = _Server6 if ":" in host.strip("[]") else _Server
        try:
            self.server = cls((host.strip("[]"), port), _handler(self.board, is_loopback(host)))
        except OSError as err:
            raise UsageError(f"cannot listen on {host}:{port}: {err.strerror}") from None
        bound = self.server.server_address[1]
        shown = f"[{host.strip('[]')}]" if cls is _Server6 else host
        self.url = f"http://{shown}:{bound}/"
        self._threads = [threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.2},
                                          daemon=True),
                         threading.Thread(target=self.board.run_refresher, daemon=True)]
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self.board.stop()
        self.server.shutdown()
        self.server.server_close()
        for t in self._threads:
            t.join(timeout=5)


def serve(ctx: Ctx, *, host: str, port: int, token: str | None,
          timeout: float | None) -> ServeResult:
    running = Running(ctx, host, port, token)
    stop = threading.Event()
    # SIGTERM stops it as cleanly as ^C does, and so does SIGINT ignored at start.
    from hunkwise.shared.proc import stop_on_signals

    stop_on_signals()
    try:
        # Inside the try: an interrupt right after "ready" (a reader quick to act on the
        # line) stops the board as cleanly as one during the wait.
        sys.stderr.write(f"board: ready at {running.url}"
                         + ("?token=<your token>" if token else "") + "\n")
        sys.stderr.flush()
        stop.wait(timeout)
    except KeyboardInterrupt:
        pass
    finally:
        running.stop()
    return {"url": running.url, "requests": running.board.requests}
