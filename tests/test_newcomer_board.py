"""The board as a supervisor reads it: long grant paths stay in their column, and at
phone width (390 px) every row fits and the answer box is on screen. Headless Chromium
through Playwright, skipped as tests/test_board_browser.py is when either is missing; the
screenshots go to build/ (never over the tracked docs/board.png)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hunkwise.shared.state.context import open_repo

from testing.cli import Cli, ok
from testing.repo import numbered

CHROMIUM = os.environ.get("HUNKWISE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage"]
BUILD = Path(__file__).resolve().parent.parent / "build"


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

from playwright.sync_api import Browser, Page, expect, sync_playwright  # noqa: E402

A = "sess-20260101-0900-worker@box-a"
# 80 characters, as a real project's nested source paths are.
LONG = "src/itsdangerous/serializers/compat/very_long_module_name_for_the_board_tests.py"
assert len(LONG) == 80


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
    other = LONG.replace("very_long", "another_long")
    repo = make_repo({LONG: numbered(10), other: numbered(10), "g.txt": "g\n"})
    ok(coord(repo, "assign", "t1", "--title", "Rewrite the compat serializer", "--expect", "e",
             "--write", f"{LONG}:1-3", "--write", "g.txt"))
    ok(coord(repo, "assign", "t2", "--title", "second", "--expect", "e", "--write", other))
    ok(worker(repo, "start", "t1", session=A))
    ok(worker(repo, "ask", "t1", "--question", "Ship the new serializer behind a flag or not?",
              "--kind", "deploy", session=A))
    return repo


def _open(scene: Path, browser: Browser, width: int, height: int) -> Iterator[Page]:
    from hunkwise.coordinator.board import Running

    running = Running(open_repo(str(scene)), "127.0.0.1", 0, None)
    context = browser.new_context(viewport={"width": width, "height": height})
    context.set_default_timeout(10_000)
    pg = context.new_page()
    try:
        pg.goto(running.url)
        pg.wait_for_selector('#tasks tr[data-task="t1"]')
        yield pg
    finally:
        context.close()
        running.stop()


def _box(pg: Page, selector: str) -> dict[str, float]:
    box = pg.locator(selector).first.bounding_box()
    assert box is not None, selector
    return box


def _shot(pg: Page, name: str) -> None:
    BUILD.mkdir(exist_ok=True)
    pg.screenshot(path=str(BUILD / name), full_page=True)


def _grants_inside_their_cells(pg: Page) -> None:
    for task in ("t1", "t2"):
        cell = _box(pg, f'#tasks tr[data-task="{task}"] td:nth-child(3)')
        for code in pg.locator(f'#tasks tr[data-task="{task}"] td:nth-child(3) code').all():
            b = code.bounding_box()
            assert b is not None
            assert b["x"] >= cell["x"] - 0.5 and b["x"] + b["width"] <= cell["x"] + cell["width"] + 0.5, \
                (task, b, cell)


def test_long_grant_paths_never_run_under_the_session_column(scene: Path, browser: Browser) -> None:
    for pg in _open(scene, browser, 1280, 900):
        _grants_inside_their_cells(pg)
        grants = _box(pg, '#tasks tr[data-task="t1"] td:nth-child(3)')
        session = _box(pg, '#tasks tr[data-task="t1"] td:nth-child(4)')
        assert grants["x"] + grants["width"] <= session["x"] + 0.5
        assert LONG in pg.locator('#tasks tr[data-task="t1"] td:nth-child(3)').inner_text() \
            .replace("\n", "")
        _shot(pg, "board-1280.png")


def test_the_board_at_phone_width(scene: Path, browser: Browser, coord: Cli) -> None:
    for pg in _open(scene, browser, 390, 844):
        # Nothing wider than the screen: no sideways scrolling.
        width = pg.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, width
        _grants_inside_their_cells(pg)
        answer = '#decisions form.decide input[name="answer"]'
        for sel in (answer, "#decisions form.decide button"):
            b = _box(pg, sel)
            assert b["x"] >= 0 and b["x"] + b["width"] <= 390, (sel, b)
        assert _box(pg, answer)["width"] >= 250  # a box one can type a sentence into
        _shot(pg, "board-390.png")
        # And it answers from there.
        pg.locator(answer).fill("Behind a flag")
        pg.locator("#decisions form.decide button").click()
        expect(pg.locator("#result")).to_contain_text("answered")
    got = ok(coord(scene, "decisions", "--all"))["decisions"]
    assert [d["answer"] for d in got] == ["Behind a flag"]
