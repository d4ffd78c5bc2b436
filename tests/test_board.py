"""coord board: the state over HTTP on loopback, live; decisions answered from the page
through the same core function as `coord decide`; every worker-written string escaped;
tokens and CSRF enforced."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hunkwise.shared.state.context import open_repo

from testing.cli import Cli, ok
from testing.env import BIN
from testing.repo import numbered
from testing.state import age_claims
from testing.wait import Lines, stopped_by_each_signal, wait_until

A = "sess-20260101-0900-worker@box-a"
B = "sess-20260101-0901-worker@box-b"
EVIL = '<img src=x onerror="alert(1)">&<script>alert(2)</script>'


def request(url: str, *, data: bytes | None = None, headers: dict[str, str] | None = None,
            method: str | None = None) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(req, timeout=30) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *a: Any, **k: Any) -> None:
        return None


@pytest.fixture
def scene(make_repo: Callable[..., Path], coord: Cli, worker: Cli) -> Path:
    repo = make_repo({"f.txt": numbered(10), "g.txt": numbered(10, "g")})
    ok(coord(repo, "assign", "t1", "--title", EVIL, "--expect", "e", "--write", "f.txt:1-3"))
    ok(coord(repo, "assign", "t2", "--title", "second", "--expect", "e", "--write", "g.txt"))
    ok(coord(repo, "assign", "t3", "--title", "third", "--expect", "e", "--write", "f.txt:6-8"))
    ok(worker(repo, "start", "t1", session=A))
    ok(worker(repo, "ask", "t1", "--question", f"Which one? {EVIL}", "--kind", "scope", session=A))
    return repo


@pytest.fixture
def board(scene: Path) -> Iterator[Any]:
    from hunkwise.coordinator.board import Running

    running = Running(open_repo(str(scene)), "127.0.0.1", 0, None)
    yield running
    running.stop()


def state_of(url: str, **kw: Any) -> dict[str, Any]:
    code, _h, body = request(url + "state.json", **kw)
    assert code == 200, body
    return dict(json.loads(body))


def csrf_of(page: str) -> str:
    m = re.search(r'<meta name="csrf" content="([^"]+)">', page)
    assert m, page[:500]
    return m.group(1)


# ---- reading --------------------------------------------------------------------------------------

def test_the_page_and_the_json_show_the_state_with_every_worker_string_escaped(board: Any) -> None:
    code, headers, body = request(board.url)
    assert code == 200 and headers["Content-Type"].startswith("text/html")
    page = body.decode()
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&amp;&lt;script&gt;alert(2)&lt;/script&gt;" in page
    assert "<img" not in page and "alert(2)</script>" not in page
    assert page.count("<script") == 1  # the page's own, carrying the CSP nonce
    nonce = re.search(r"<script nonce=\"([^\"]+)\">", page)
    assert nonce and f"'nonce-{nonce.group(1)}'" in headers["Content-Security-Policy"]
    for section in ("decisions", "tasks", "inbox", "signals", "lost", "freeze"):
        assert f'id="{section}"' in page
    doc = state_of(board.url)
    tasks = {t["id"]: t for t in doc["tasks"]}
    assert tasks["t1"]["state"] == "in_progress" and tasks["t1"]["claim"]["session"] == A
    assert tasks["t1"]["grants"] == ["f.txt:1-3"] and tasks["t2"]["state"] == "assigned"
    assert doc["decisions"][0]["kind"] == "scope" and doc["freeze"] is None


def test_the_fragment_follows_a_state_change_within_two_seconds(board: Any, scene: Path,
                                                               worker: Cli) -> None:
    code, headers, _ = request(board.url + "fragment")
    etag = headers["ETag"]
    assert request(board.url + "fragment", headers={"If-None-Match": etag})[0] == 304
    ok(worker(scene, "start", "t2", session=B))
    t0 = time.monotonic()

    def shows_t2_running() -> bool:
        return any(t["id"] == "t2" and t["state"] == "in_progress" and t["claim"]
                   for t in state_of(board.url)["tasks"])

    wait_until(shows_t2_running, timeout=10, what="t2 in progress on the board")
    assert time.monotonic() - t0 < 2.0
    code, headers, body = request(board.url + "fragment", headers={"If-None-Match": etag})
    assert code == 200 and headers["ETag"] != etag and B in body.decode()


def test_a_stale_claim_is_marked(board: Any, scene: Path) -> None:
    assert "STALE" not in request(board.url + "fragment")[2].decode()
    age_claims(scene, "t1")
    wait_until(lambda: "STALE" in request(board.url + "fragment")[2].decode(), timeout=10,
               what="the stale mark")
    t1 = next(t for t in state_of(board.url)["tasks"] if t["id"] == "t1")
    assert t1["claim"]["stale"] is True


# ---- answering ---------------------------------------------------------------------------------

def test_a_decision_needs_the_csrf_token_and_then_counts_as_an_intervention(
        board: Any, scene: Path, coord: Cli) -> None:
    page = request(board.url)[2].decode()
    token = csrf_of(page)
    dec = state_of(board.url)["decisions"][0]["id"]
    body = json.dumps({"decision": dec, "answer": "the first"}).encode()
    js = {"Content-Type": "application/json"}
    assert request(board.url + "decide", data=body, headers=js)[0] == 403
    assert request(board.url + "decide", data=body, headers={**js, "X-CSRF-Token": "nope"})[0] == 403
    cross = {**js, "X-CSRF-Token": token, "Origin": "http://evil.example"}
    assert request(board.url + "decide", data=body, headers=cross)[0] == 403
    assert ok(coord(scene, "decisions"))["decisions"][0]["state"] == "open"

    code, _h, out = request(board.url + "decide", data=body, headers={**js, "X-CSRF-Token": token})
    assert code == 200, out
    assert json.loads(out)["decision"]["answer"] == "the first"
    all_ = ok(coord(scene, "decisions", "--all"))
    assert [(d["id"], d["state"], d["answer"]) for d in all_["decisions"]] == [(dec, "answered", "the first")]
    assert all_["interventions"] == 1
    # Answered twice: refused like coord decide (409), nothing counted again.
    code, _h, out = request(board.url + "decide", data=body, headers={**js, "X-CSRF-Token": token})
    assert code == 409 and "answered already" in json.loads(out)["error"]
    assert ok(coord(scene, "decisions", "--all"))["interventions"] == 1


def test_a_plain_form_post_answers_too(board: Any, scene: Path, coord: Cli, worker: Cli) -> None:
    ok(worker(scene, "ask", "t1", "--question", "Again?", "--kind", "priority", session=A))
    page = request(board.url)[2].decode()
    dec = wait_until(lambda: [d["id"] for d in state_of(board.url)["decisions"]
                              if d["question"] == "Again?"], timeout=10, what="the decision")[0]
    form = f"csrf={csrf_of(page)}&decision={dec}&answer=yes%20please".encode()
    code, headers, _ = request(board.url + "decide", data=form,
                               headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert code == 303 and headers["Location"] == "./"
    got = {d["id"]: d["answer"] for d in ok(coord(scene, "decisions", "--all"))["decisions"]}
    assert got[dec] == "yes please"


# ---- who may look --------------------------------------------------------------------------------

def test_a_foreign_host_header_is_refused_on_loopback(board: Any) -> None:
    assert request(board.url, headers={"Host": "attacker.example:80"})[0] == 403
    assert request(board.url, headers={"Host": "localhost"})[0] == 200


def test_a_token_is_required_when_given(scene: Path) -> None:
    from hunkwise.coordinator.board import Running

    token = "t0ken-0123456789abcdef"
    running = Running(open_repo(str(scene)), "127.0.0.1", 0, token)
    try:
        assert request(running.url)[0] == 401
        assert request(running.url + "state.json", headers={"X-Board-Token": "wrong-token-xxxxxxxx"})[0] == 401
        assert request(running.url + "state.json", headers={"X-Board-Token": token})[0] == 200
        assert request(running.url + "state.json", headers={"Authorization": f"Bearer {token}"})[0] == 200
        code, headers, _ = request(running.url + f"?token={token}")
        assert code == 200 and "HttpOnly" in headers["Set-Cookie"]
        cookie = headers["Set-Cookie"].split(";")[0]
        assert request(running.url + "fragment", headers={"Cookie": cookie})[0] == 200
    finally:
        running.stop()


def test_listening_beyond_loopback_needs_a_token(scene: Path, coord: Cli) -> None:
    r = coord(scene, "board", "--host", "0.0.0.0", "--port", "0")
    assert r.code == 2 and "--token" in r.doc["error"]["message"]
    r = coord(scene, "board", "--host", "0.0.0.0", "--port", "0", "--token", "short")
    assert r.code == 2 and "16" in r.doc["error"]["message"]


def test_coord_board_prints_its_url_when_ready_and_stops_on_interrupt(scene: Path) -> None:
    proc = subprocess.Popen([str(BIN / "coord"), "board", "--port", "0"], cwd=scene,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = Lines(proc.stderr).wait_for("board: ready at ")
        url = line.split("board: ready at ", 1)[1].strip()
        assert url.startswith("http://127.0.0.1:")
        assert "t1" in {t["id"] for t in state_of(url)["tasks"]}
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "board stopped" in out.decode()


def test_coord_board_stops_cleanly_on_sigterm_even_started_with_sigint_ignored(
        scene: Path) -> None:
    """A service manager stops it with SIGTERM; a shell's background job starts it with
    SIGINT ignored: either way it stops, answers nothing more, and says so."""
    for code, out in stopped_by_each_signal([str(BIN / "coord"), "board", "--port", "0"],
                                            scene, "board: ready at "):
        assert code == 0 and "board stopped" in out.decode(), out
