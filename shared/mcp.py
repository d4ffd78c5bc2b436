"""What the two MCP servers (`coord mcp`, `worker mcp`) share: the SDK's server class, and
running one command of a CLI as a process of its own, answered as its JSON document.

Built on the official MCP Python SDK (the `mcp` extra: `pip install 'hunkwise[mcp]'`);
its `MCPServer` (`FastMCP` before version 2) and `.tool()` decorator.
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
