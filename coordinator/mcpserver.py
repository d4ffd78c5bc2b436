"""`coord mcp`: the coordinator's reading commands as an MCP server over stdio.

For agents without a shell: each tool runs the `coord` command of the same name (a
process of its own, so its output never mixes with the protocol on stdout) and answers
its JSON document with the exit code. Only commands that read are served; everything that
changes the tree or the state stays with the coordinator's shell, and enforcement stays
in the hooks. Built on the official MCP Python SDK (the `mcp` extra: `pip install
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

_MAIN = "import sys\nfrom hunkwise.{side}.cli import main\nsys.exit(main(sys.argv[1:]))\n"


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


def call(side: str, repo: Path, *args: str) -> dict[str, Any]:
    """Run `coord|worker ARGS --json` in `repo`: {"exit_code", "result" | "error"}."""
    p = subprocess.run([sys.executable, "-c", _MAIN.format(side=side), *args, "--json",
                        "--repo", str(repo)], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, env=dict(os.environ), timeout=3600)
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
    server = server_class()(name="hunkwise-coord", instructions=(
        "Read the hunkwise coordinator's state of this shared git working tree: tasks and "
        "claims, the inbox, a task's validation and exact diff, signals and decisions."))

    def status() -> dict[str, Any]:
        """Tasks (state, session, claim, launched agent), freeze, inbox, unowned changes."""
        return call("coordinator", repo, "status")

    def inbox() -> dict[str, Any]:
        """Pending reports, oldest first."""
        return call("coordinator", repo, "inbox")

    def review(task_id: str) -> dict[str, Any]:
        """Validate a task's newest report against the real diff (exit 0 valid, 1 not)."""
        return call("coordinator", repo, "review", task_id)

    def diff(task_id: str, stat: bool = False) -> dict[str, Any]:
        """Exactly the patch `coord accept` would commit for the task now."""
        return call("coordinator", repo, "diff", task_id, *(["--stat"] if stat else []))

    def signals(pending_only: bool = True) -> dict[str, Any]:
        """Signals between sessions."""
        return call("coordinator", repo, "signals", *(["--pending"] if pending_only else []))

    def decisions() -> dict[str, Any]:
        """Decisions waiting for the human supervisor."""
        return call("coordinator", repo, "decisions")

    for tool in (status, inbox, review, diff, signals, decisions):
        server.tool()(tool)  # the SDK reads each one's name, signature and docstring
    return server


def serve(repo: Path) -> None:
    build(repo).run(transport="stdio")
