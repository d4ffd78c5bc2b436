"""A burst of workers: N `worker done` processes at once, each on its own task.

    .venv/bin/python bench/burst.py [--workers 64]

Every one must deliver (exit 0); none may be refused for the state lock. Prints the wall
time of the burst, the exit codes and the load average around it. Scene-setting runs
in-process; the burst itself is N real processes, as N agents would be.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=64)
    ap.add_argument("--quick", action="store_true", help="16 workers")
    args = ap.parse_args()
    n = 16 if args.quick else args.workers
    home = Path(tempfile.mkdtemp(prefix="hunkwise-burst-"))
    os.environ.update({"HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1",
                       "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"),
                       "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.com",
                       "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@example.com"})
    for k in [k for k in os.environ if k.startswith("COORD_")]:
        del os.environ[k]
    repo = home / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    for i in range(n):
        (repo / f"f{i}.txt").write_text("a\n")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "base"], cwd=repo, check=True)
    os.chdir(repo)
    from hunkwise.coordinator.cli import main as coord
    from hunkwise.worker.cli import main as worker

    with contextlib.redirect_stdout(io.StringIO()):
        for i in range(n):
            coord(["assign", f"t{i}", "--title", "t", "--expect", "e", "--write", f"f{i}.txt"])
            worker(["start", f"t{i}", "--session", f"sess-20260101-0000-w{i}@burst"])
    for i in range(n):
        (repo / f"f{i}.txt").write_text("b\n")
    load0 = os.getloadavg()
    t0 = time.monotonic()
    procs = [subprocess.Popen([str(BIN / "worker"), "done", f"t{i}"], cwd=repo,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for i in range(n)]
    results = [(p.wait(), (p.stderr.read() if p.stderr else b"").decode()[:300]) for p in procs]
    wall = time.monotonic() - t0
    refused = [e for c, e in results if c != 0]
    print(f"{n} concurrent worker done: {wall:.1f}s wall, {n - len(refused)} delivered, "
          f"{len(refused)} refused; load average {load0[0]:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after")
    for e in refused[:3]:
        print("  refused:", e.strip())
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
