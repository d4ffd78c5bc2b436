"""`coord mcp`: the coordinator's reading commands as an MCP server over stdio.

For agents without a shell: each tool runs the `coord` command of the same name (a
process of its own, so its output never mixes with the protocol on stdout) and answers
its JSON document with the exit code. Only commands that read are served; everything that
changes the tree or the state stays with the coordinator's shell, and enforcement stays
in the hooks. Built on the official MCP Python SDK (the `mcp` extra: `pip install
'hunkwise[mcp]'`); its `MCPServer` (`FastMCP` before version 2) and `.tool()` decorator.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hunkwise.shared import mcp
from hunkwise.shared.mcp import server_class as server_class


def call(repo: Path, *args: str) -> dict[str, Any]:
    """Run `coord ARGS --json` in `repo`: {"exit_code", "result" | "error"}."""
    return mcp.call("coordinator", repo, *args)


def build(repo: Path) -> Any:
    server = server_class()(name="hunkwise-coord", instructions=(
        "Read the hunkwise coordinator's state of this shared git working tree: tasks and "
        "claims, the inbox, a task's validation and exact diff, signals and decisions."))

    def status() -> dict[str, Any]:
        """Tasks (state, session, claim, launched agent), freeze, inbox, unowned changes."""
        return call(repo, "status")

    def inbox() -> dict[str, Any]:
        """Pending reports, oldest first."""
        return call(repo, "inbox")

    def review(task_id: str) -> dict[str, Any]:
        """Validate a task's newest report against the real diff (exit 0 valid, 1 not)."""
        return call(repo, "review", task_id)

    def diff(task_id: str, stat: bool = False) -> dict[str, Any]:
        """Exactly the patch `coord accept` would commit for the task now."""
        return call(repo, "diff", task_id, *(["--stat"] if stat else []))

    def signals(pending_only: bool = True) -> dict[str, Any]:
        """Signals between sessions."""
        return call(repo, "signals", *(["--pending"] if pending_only else []))

    def decisions() -> dict[str, Any]:
        """Decisions waiting for the human supervisor."""
        return call(repo, "decisions")

    for tool in (status, inbox, review, diff, signals, decisions):
        server.tool()(tool)  # the SDK reads each one's name, signature and docstring
    return server


def serve(repo: Path) -> None:
    build(repo).run(transport="stdio")
