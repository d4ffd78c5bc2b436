"""Entry point for `make bench`: one table of what every agent tool call and every task pays
for hunkwise, each case against its floor as a paired ratio (bench/costs.py), the guard's
rows first (bench/hooks.py, when it is there).

    .venv/bin/python bench/run.py [--quick] [--runs K]   # the table
    .venv/bin/python bench/run.py --all [--quick]        # and then every other bench here

The table also goes to bench/results/costs.json; see bench/README.md.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
OTHERS = ("core_loop", "accept", "verify", "checkout", "snapshot", "burst", "startup", "history",
          "hooks", "regions")


def guard_rows(quick: bool, runs: int | None) -> list[object]:
    """The rows of bench/hooks.py: its `rows(quick, runs)` gives `costs.Row`s (the guard's
    Bash and Edit calls against `python -c pass`); none while it does not exist."""
    if importlib.util.find_spec("hooks") is None:
        return []
    import hooks

    if not hasattr(hooks, "rows"):
        return []  # bench/hooks.py prints its own table (bench/run.py --all runs it)
    return list(hooks.rows(quick=quick, runs=runs))


def main(argv: list[str]) -> int:
    import costs
    from common import RESULTS, print_table

    quick = "--quick" in argv
    runs = int(argv[argv.index("--runs") + 1]) if "--runs" in argv else None
    found = guard_rows(quick, runs)
    more, flat = costs.rows(quick, runs)
    found += more
    print(print_table([r.cells() for r in found] + flat, costs.HEADER))  # type: ignore[attr-defined]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "costs.json").write_text(json.dumps(
        {"rows": [r.as_json() for r in found], "growth": flat,  # type: ignore[attr-defined]
         "loadavg_end": os.getloadavg(), "cpus": os.cpu_count()}, indent=1) + "\n")
    if "--all" not in argv:
        return 0
    failed = []
    extra = ["--quick"] if quick else []
    for name in OTHERS:
        print(f"\n=== bench/{name}.py {' '.join(extra)}", flush=True)
        if subprocess.run([sys.executable, "-B", str(HERE / f"{name}.py"), *extra]).returncode:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
