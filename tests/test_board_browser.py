"""coord board in a real headless Chromium (Debian's `chromium`), driven by Playwright:
the page loads and shows the tasks, follows a state change within 2 s, marks a stale
claim, and answers a decision with a click that reaches `coord decisions --all`.

One browser serves the whole module; every test gets its own repository, board and
browser context. Without /usr/bin/chromium (or $HUNKWISE_CHROMIUM) or the playwright
package the module is skipped, unless HUNKWISE_REQUIRE_BROWSER=1 (CI), where it fails.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hunkwise.shared.state.context import open_repo

from testing.cli import Cli, ok
from testing.repo import numbered
from testing.state import age_claims

CHROMIUM = os.environ.get("HUNKWISE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
# Chromium on a machine with no outside network: no background connections, no first-run
# work, a fresh profile (Playwright makes one per launch).
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage"]


def _missing() -> str | None:
    if not os.access(CHROMIUM, os.X_OK):
        return f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e '.[test]')"
    return None


_why = _missing()
if _why:
    if os.environ.get("HUNKWISE_REQUIRE_BROWSER") == "1":
        pytest.fail(f"HUNKWISE_REQUIRE_BROWSER=1 but {_why}", pytrace=False)
    pytest.skip(_why, allow_module_level=True)

from playwright.sync_api import Browser, ConsoleMessage, Page, expect, sync_playwright  # noqa: E402

A = "sess-20260101-0900-worker@box-a"
B = "sess-20260101-0901-worker@box-b"
EVIL = '<img src=x onerror="alert(1)">&<script>alert(2)</script>'


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    home = tmp_path_factory.mktemp("browser-home")
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_CACHE_HOME": str(home / ".cache"), "PATH": os.environ.get("PATH", ""),
           "TZ": "UTC", "LANG": "C.UTF-8"}
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS, env=env,
                               timeout=60_000)
        yield b
        b.close()


@pytest.fixture
def scene(make_repo: Callable[..., Path], coord: Cli, worker: Cli) -> Path:
    repo = make_repo({"f.txt": numbered(10), "g.txt": numbered(10, "g")})
    ok(coord(repo, "assign", "t1", "--title", EVIL, "--expect", "e", "--write", "f.txt:1-3"))
    ok(coord(repo, "assign", "t2", "--title", "second", "--expect", "e", "--write", "g.txt"))
    ok(coord(repo, "assign", "t3", "--title", "third", "--expect", "e", "--write", "f.txt:6-8"))
    ok(worker(repo, "start", "t1", session=A))
    ok(worker(repo, "ask", "t1", "--question", "Ship behind a flag?", "--kind", "deploy",
              session=A))
    return repo


@pytest.fixture
def page(scene: Path, browser: Browser) -> Iterator[Page]:
    """The board of `scene`, open in a fresh browser context; no page error, no console
    error (a Content-Security-Policy violation would be one) may happen meanwhile."""
    from hunkwise.coordinator.board import Running

    running = Running(open_repo(str(scene)), "127.0.0.1", 0, None)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(10_000)
    pg = context.new_page()
    problems: list[str] = []
    pg.on("pageerror", lambda err: problems.append(f"page error: {err}"))

    def on_console(msg: ConsoleMessage) -> None:
        if msg.type == "error":
            problems.append(f"console: {msg.text}")

    pg.on("console", on_console)
    try:
        pg.goto(running.url)
        yield pg
    finally:
        context.close()
        running.stop()
    assert not problems, problems


def row(pg: Page, task: str, state: str | None = None) -> Any:
    sel = f'#tasks tr[data-task="{task}"]' + (f'[data-state="{state}"]' if state else "")
    return pg.locator(sel)


def test_the_page_loads_and_shows_the_tasks(page: Page) -> None:
    expect(page).to_have_title(re.compile(r"^hunkwise board · repo\d+$"))
    expect(row(page, "t1", "in_progress")).to_have_count(1)
    expect(row(page, "t2", "assigned")).to_have_count(1)
    expect(row(page, "t3", "assigned")).to_have_count(1)
    # A worker's title is text, never markup.
    expect(row(page, "t1")).to_contain_text(EVIL)
    expect(page.locator("#board img, #board script")).to_have_count(0)
    expect(row(page, "t1")).to_contain_text(A)
    expect(page.locator("#decisions")).to_contain_text("Ship behind a flag?")
    # The script runs under the CSP: its first poll comes back and it says so.
    expect(page.locator("#live")).to_have_text("live")
    page.wait_for_function("document.getElementById('live').className === ''")


def test_a_task_that_changes_state_is_shown_within_two_seconds(page: Page, scene: Path,
                                                             worker: Cli) -> None:
    expect(row(page, "t2", "assigned")).to_have_count(1)
    ok(worker(scene, "start", "t2", session=B))
    t0 = time.monotonic()
    expect(row(page, "t2", "in_progress")).to_have_count(1, timeout=2_000)
    assert time.monotonic() - t0 < 2.0
    expect(row(page, "t2")).to_contain_text(B)
    expect(row(page, "t2", "assigned")).to_have_count(0)


def test_a_stale_claim_is_marked_stale(page: Page, scene: Path) -> None:
    expect(row(page, "t1")).to_contain_text("heartbeat")
    expect(row(page, "t1").locator(".stale-mark")).to_have_count(0)
    age_claims(scene, "t1")
    expect(row(page, "t1").locator(".stale-mark")).to_have_text("STALE")
    expect(page.locator("#tasks tr.stale-row")).to_have_count(1)
    expect(page.locator(".summary")).to_contain_text("1 stale claim")


def test_a_decision_answered_from_the_page_reaches_coord_decisions(page: Page, scene: Path,
                                                                  coord: Cli) -> None:
    dec = ok(coord(scene, "decisions"))["decisions"][0]["id"]
    form = page.locator(f'#decisions tr[data-dec="{dec}"] form.decide')
    form.locator('input[name="answer"]').fill("Yes, behind HUNKWISE_NEW")
    form.locator("button").click()
    expect(page.locator("#result")).to_have_text(f"{dec} answered")
    got = ok(coord(scene, "decisions", "--all"))
    assert [(d["id"], d["state"], d["answer"]) for d in got["decisions"]] == [
        (dec, "answered", "Yes, behind HUNKWISE_NEW")]
    assert got["interventions"] == 1
    # The page follows: nothing waits any more.
    expect(page.locator("#decisions")).to_contain_text("no decision waits")
    expect(page.locator(".summary")).to_contain_text("1 intervention this batch")
