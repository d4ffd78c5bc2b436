"""`worker mcp`: a worker's reading and reporting commands as an MCP server over stdio.

For agents without a shell: each tool runs the `worker` command of the same name (a
process of its own, so its output never mixes with the protocol on stdout), with this
server's environment (`COORD_SESSION` names the worker), and answers its JSON document and
exit code. Staging, committing and every other git write stay out of reach; enforcement
stays in the hooks. Built on the official MCP Python SDK (the `mcp` extra: `pip install
'hunkwise[mcp]'`); its `MCPServer` (`FastMCP` before version 2) and `.tool()` decorator.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hunkwise.shared import mcp
from hunkwise.shared.mcp import server_class as server_class


def call(repo: Path, *args: str) -> dict[str, Any]:
    """Run `worker ARGS --json` in `repo`: {"exit_code", "result" | "error"}."""
    return mcp.call("worker", repo, *args)


def build(repo: Path) -> Any:
    server = server_class()(name="hunkwise-worker", instructions=(
        "Work on one hunkwise task in a shared git working tree: read your brief, edit only "
        "your grants, never stage or commit, and finish with done (or blocked, failed)."))

    def start(task_id: str) -> dict[str, Any]:
        """Claim the task (or, holding it, print the brief again with notes and signals)."""
        return call(repo, "start", task_id)

    def signals(ack: bool = False) -> dict[str, Any]:
        """The signals addressed to this session; `ack` acknowledges them."""
        return call(repo, "signals", *(["--ack"] if ack else []))

    def heartbeat(task_id: str) -> dict[str, Any]:
        """Keep the claim alive during a long step."""
        return call(repo, "heartbeat", task_id)

    def checkpoint(task_id: str, next_step: str, context: str = "") -> dict[str, Any]:
        """Record where to resume: the next step, and context not in git."""
        return call(repo, "checkpoint", task_id, "--next", next_step,
                    *(["--context", context] if context else []))

    def ask(task_id: str, question: str, kind: str = "scope") -> dict[str, Any]:
        """Raise a decision for the human supervisor (priority, architecture, scope, deploy)."""
        return call(repo, "ask", task_id, "--question", question, "--kind", kind)

    def done(task_id: str, summary: str = "", commit_message: str = "") -> dict[str, Any]:
        """Run the checks and deliver the report; then stop."""
        return call(repo, "done", task_id, *(["--summary", summary] if summary else []),
                    *(["--commit-message", commit_message] if commit_message else []))

    def blocked(task_id: str, reason: str) -> dict[str, Any]:
        """Deliver a blocked report with the reason; then stop."""
        return call(repo, "blocked", task_id, "--reason", reason)

    def failed(task_id: str, reason: str) -> dict[str, Any]:
        """Deliver a failed report with the reason; then stop."""
        return call(repo, "failed", task_id, "--reason", reason)

    for tool in (start, signals, heartbeat, checkpoint, ask, done, blocked, failed):
        server.tool()(tool)  # the SDK reads each one's name, signature and docstring
    return server


def serve(repo: Path) -> None:
    build(repo).run(transport="stdio")
