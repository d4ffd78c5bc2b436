"""Entry point for `make bench`: runs every benchmark of this directory, one after another.

    .venv/bin/python bench/run.py [--quick]

Each writes bench/results/<name>.json and prints its table; see bench/README.md.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHES = ("core_loop", "accept", "verify", "checkout", "snapshot", "burst", "startup", "history",
           "hooks")

if __name__ == "__main__":
    extra = [a for a in sys.argv[1:] if a == "--quick"]
    failed = []
    for name in BENCHES:
        print(f"\n=== bench/{name}.py {' '.join(extra)}", flush=True)
        if subprocess.run([sys.executable, "-B", str(HERE / f"{name}.py"), *extra]).returncode:
            failed.append(name)
    sys.exit(f"failed: {', '.join(failed)}" if failed else 0)
