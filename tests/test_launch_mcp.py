"""`coord mcp` / `worker mcp`: stdio MCP servers (the `mcp` extra) driven by the official
SDK's own client, as an agent without a shell would use them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from testing.env import BIN
from testing.repo import git


def test_without_the_sdk_mcp_is_one_line_and_exit_2(make_repo, coord, worker, monkeypatch) -> None:
    import sys

    for name in ("mcp", "mcp.server", "mcp.server.mcpserver", "mcp.server.fastmcp"):
        monkeypatch.setitem(sys.modules, name, None)  # an import of it fails
    repo = make_repo({"a.txt": "a\n"})
    for cli in (coord, worker):
        r = cli(repo, "mcp", "--repo", str(repo), json_out=False)
        assert r.code == 2 and "pip install 'hunkwise[mcp]'" in r.stderr


def _call(tool: str, repo: Path, calls: list[tuple[str, dict[str, Any]]],
          env: dict[str, str]) -> tuple[list[str], list[Any]]:
    pytest.importorskip("mcp")
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=str(BIN / tool), args=["mcp", "--repo", str(repo)],
                                   env={**os.environ, **env}, cwd=str(repo))
    answers: list[Any] = []
    names: list[str] = []

    async def run() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            names.extend(t.name for t in (await s.list_tools()).tools)
            for name, args in calls:
                got = await s.call_tool(name, args)
                answers.append(json.loads(got.content[0].text))

    anyio.run(run)
    return names, answers


@pytest.mark.slow
def test_a_worker_reports_through_mcp_and_the_coordinator_reads_it(make_repo, coord, worker) -> None:
    repo = make_repo({"a.txt": "one\ntwo\n"})
    assert coord(repo, "assign", "T1", "--title", "t", "--expect", "e", "--write", "a.txt").code == 0
    session = worker(repo, "start", "T1").doc["session"]
    (repo / "a.txt").write_text("one\nTWO\n")
    names, got = _call("worker", repo, [("start", {"task_id": "T1"}),
                                        ("done", {"task_id": "T1", "summary": "via mcp"})],
                       {"COORD_SESSION": session})
    assert {"start", "done", "blocked", "failed", "signals", "ask", "checkpoint"} <= set(names)
    assert "commit" not in names and "accept" not in names
    assert got[0]["exit_code"] == 0 and got[0]["result"]["session"] == session
    assert got[1]["exit_code"] == 0, got[1]
    names, got = _call("coord", repo, [("inbox", {}), ("review", {"task_id": "T1"}),
                                       ("diff", {"task_id": "T1"})], {})
    assert "accept" not in names and {"status", "inbox", "review", "diff"} <= set(names)
    assert [r["task_id"] for r in got[0]["result"]["reports"]] == ["T1"]
    assert got[1]["exit_code"] == 0 and got[1]["result"]["ok"] is True
    assert "+TWO" in got[2]["result"]["patch"]
    assert coord(repo, "accept", "T1").code == 0
    assert git(repo, "show", "HEAD:a.txt") == "one\nTWO\n"


@pytest.mark.slow
def test_an_error_comes_back_as_its_exit_code_and_message(make_repo) -> None:
    repo = make_repo({"a.txt": "a\n"})
    _names, got = _call("worker", repo, [("done", {"task_id": "nosuch"})], {})
    assert got[0]["exit_code"] == 2 and "unknown task" in got[0]["error"]["message"]
