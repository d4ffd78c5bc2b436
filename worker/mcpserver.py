"""`worker mcp`: a worker's reading and reporting commands as an MCP server over stdio.

For agents without a shell: each tool runs the `worker` command of the same name (a
process of its own, so its output never mixes with the protocol on stdout), with this
server's environment (`COORD_SESSION` names the worker), and answers its JSON document and
exit code. Staging, committing and every other git write stay out of reach; enforcement
stays in the hooks. Built on the official MCP Python SDK (the `mcp` extra: `pip install
'hunkwise[mcp]'`); its `MCPServer` (`FastMCP` before version 2) and `.tool()` decorator.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from hunkwise.shared.errors import UsageError

_MAIN = "import sys\nfrom hunkwise.worker.cli import main\nsys.exit(main(sys.argv[1:]))\n"


def server_class() -> Any:
    """The SDK's server class, or exit 2 naming the extra to install. Imported by name:
    the SDK is an optional extra, and its class was renamed in version 2."""
    import importlib

    for module, name in (("mcp.server.mcpserver", "MCPServer"), ("mcp.server.fastmcp", "FastMCP")):
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
    raise UsageError("the MCP server needs the official MCP Python SDK: "
                     "pip install 'hunkwise[mcp]'")


def call(repo: Path, *args: str) -> dict[str, Any]:
    """Run `worker ARGS --json` in `repo`: {"exit_code", "result" | "error"}."""
    p = subprocess.run([sys.executable, "-c", _MAIN, *args, "--json", "--repo", str(repo)],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL,
                       env=dict(os.environ), timeout=3600)
    try:
        doc = json.loads(p.stdout) if p.stdout.strip() else None
    except ValueError:
        doc = None
    out: dict[str, Any] = {"exit_code": p.returncode}
    if isinstance(doc, dict) and "error" in doc and p.returncode:
        out["error"] = doc["error"]
    else:
        out["result"] = doc
    if p.returncode and p.stderr.strip():
        out["stderr"] = p.stderr.strip()[-2000:]
    return out


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
