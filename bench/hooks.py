"""What every agent tool call pays for hunkwise: the agent hooks as installed.

    .venv/bin/python bench/hooks.py [--runs K] [--quick]

Each case runs the hook command the way `coord install-hooks` writes it (the absolute
interpreter, `-I -S -c`, the tool call on stdin), as its own process, paired round by round
with `python -c pass` (the same interpreter, bare): the table shows each side's median
(wall and cpu) and the median of the paired ratios.

- guard, Bash: PreToolUse of `ls -la` by a session that holds no task (the lexer alone);
- guard + provenance, Edit: PreToolUse and PostToolUse of an Edit inside the worker's
  grant (the grants read from the state; the Edit's lines recorded);
- bracket, 1k / 10k files: PreToolUse and PostToolUse of a worker's shell call (the
  before-record and the check after) against the same pair by a session that is no worker
  (the guard alone), on trees of 1,000 and 10,000 files with 20 uncommitted edits. The
  bracket's cost is the difference of the medians.

Goals (issue 23.1 and 22.4): a Bash call <= 25 ms and an Edit <= 30 ms, <= 3x the bare
interpreter; the bracket <= 50 ms over the guard alone at 10,000 files.
Results: bench/results/hooks.json and a table on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import BIN, PYTHON, RESULTS, hermetic_env, loadavg, machine, run_ru  # noqa: E402



def _hook_args() -> list[str]:
    """The interpreter's arguments as `coord install-hooks` writes them (-I -S, the import
    path written in)."""
    paths = subprocess.run([PYTHON, "-c", "from hunkwise.coordinator.hooks import import_path;"
                            " print(repr(import_path()))"], capture_output=True, text=True,
                           check=True).stdout.strip()
    return ["-I", "-S", "-c", f"import sys; sys.path += {paths}; "
            "from hunkwise.coordinator.hook import main; sys.exit(main())"]


HOOK = _hook_args()
AGENT = "bench-agent-0001"


def _git(repo: Path, env: dict[str, str], *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


def build(where: Path, files: int, env: dict[str, str]) -> Path:
    """A repository of `files` files in 100 folders, one commit, task A granted a.txt and
    started by an agent whose session id the state maps; 20 files edited."""
    repo = where / f"tree{files}"
    repo.mkdir(parents=True)
    _git(repo, env, "init", "-q")
    for i in range(files):
        d = repo / f"d{i % 100:02d}"
        d.mkdir(exist_ok=True)
        (d / f"f{i}.txt").write_text(f"file {i}\n" * 5)
    (repo / "a.txt").write_text("a1\na2\n")
    _git(repo, env, "add", "-A")
    _git(repo, env, "commit", "-q", "-m", "base")
    for i in range(20):
        with open(repo / f"d{i % 100:02d}" / f"f{i}.txt", "a") as f:
            f.write("edited\n")
    run = {**env, "CLAUDE_CODE_SESSION_ID": AGENT}
    subprocess.run([str(BIN / "coord"), "assign", "A", "--title", "A", "--expect", "e",
                    "--write", "a.txt", "--write", "d00/**"], cwd=repo, env=run, check=True,
                   capture_output=True)
    subprocess.run([str(BIN / "worker"), "start", "A"], cwd=repo, env=run, check=True,
                   capture_output=True)
    return repo


def call(repo: Path, event: str, tool: str, tool_input: dict[str, Any], agent: str,
         use: str) -> bytes:
    return json.dumps({"session_id": agent, "transcript_path": "/tmp/t.jsonl",
                       "cwd": str(repo), "hook_event_name": event, "tool_name": tool,
                       "tool_input": tool_input, "tool_use_id": use,
                       **({"tool_response": {}} if event == "PostToolUse" else {})}).encode()


def run_hook(repo: Path, env: dict[str, str], event: str, body: bytes) -> tuple[float, float]:
    r = run_ru([PYTHON, *HOOK, event], repo, env, input=body)
    if r.code not in (0, 2):
        raise SystemExit(f"hook {event} failed ({r.code}): {r.stderr[-400:]!r}")
    return r.seconds, r.cpu


def bare(repo: Path, env: dict[str, str]) -> tuple[float, float]:
    r = run_ru([PYTHON, "-c", "pass"], repo, env)
    return r.seconds, r.cpu


def pair(runs: int, a: Any, b: Any) -> dict[str, float]:
    """A and B in turn, one warm-up round; medians and the median of paired ratios."""
    a(), b()
    aw, ac, bw, bc, rw, rc = [], [], [], [], [], []
    for _ in range(runs):
        (w1, c1), (w2, c2) = a(), b()
        aw.append(w1), ac.append(c1), bw.append(w2), bc.append(c2)
        rw.append(w1 / w2 if w2 else float("nan"))
        rc.append(c1 / c2 if c2 else float("nan"))
    med = statistics.median
    return {"a_wall_ms": med(aw) * 1e3, "a_cpu_ms": med(ac) * 1e3, "b_wall_ms": med(bw) * 1e3,
            "b_cpu_ms": med(bc) * 1e3, "ratio_wall": med(rw), "ratio_cpu": med(rc)}


def both(repo: Path, env: dict[str, str], tool: str, ti: dict[str, Any], agent: str,
         tag: str) -> Any:
    """PreToolUse then PostToolUse of one call, timed together."""
    n = [0]

    def go() -> tuple[float, float]:
        n[0] += 1
        use = f"{tag}-{n[0]}"
        w1, c1 = run_hook(repo, env, "pre", call(repo, "PreToolUse", tool, ti, agent, use))
        w2, c2 = run_hook(repo, env, "post", call(repo, "PostToolUse", tool, ti, agent, use))
        return w1 + w2, c1 + c2
    return go


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    runs = 5 if args.quick else args.runs
    load0 = loadavg()
    tmp = Path(tempfile.mkdtemp(prefix="hunkwise-bench-hooks-"))
    try:
        env = hermetic_env(tmp / "home")
        env = {k: v for k, v in env.items()
               if k not in ("CLAUDE_CODE_SESSION_ID", "CODEX_THREAD_ID", "COORD_SESSION")}
        rows: dict[str, dict[str, float]] = {}
        small = build(tmp, 100, env)
        ls = {"command": "ls -la"}
        rows["guard, Bash (pre)"] = pair(runs, lambda: run_hook(
            small, env, "pre", call(small, "PreToolUse", "Bash", ls, "no-worker", "x")),
            lambda: bare(small, env))
        edit = {"file_path": str(small / "a.txt"), "old_string": "a1", "new_string": "@c\na1"}
        rows["guard + provenance, Edit (pre + post)"] = pair(
            runs, both(small, env, "Edit", edit, AGENT, "e"), lambda: bare(small, env))
        sizes = (1000,) if args.quick else (1000, 10000)
        for files in sizes:
            repo = build(tmp, files, env)
            rows[f"bracket, Bash, {files} files (pre + post)"] = pair(
                runs, both(repo, env, "Bash", ls, AGENT, "w"),
                both(repo, env, "Bash", ls, "no-worker", "n"))
        doc = {"machine": machine(load0), "runs": runs, "cases": rows}
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "hooks.json").write_text(json.dumps(doc, indent=2) + "\n")
        print(f"{'case':44} {'A wall':>8} {'A cpu':>8} {'B wall':>8} {'B cpu':>8} "
              f"{'A/B wall':>9} {'A/B cpu':>8}")
        for name, r in rows.items():
            print(f"{name:44} {r['a_wall_ms']:7.1f}ms {r['a_cpu_ms']:7.1f}ms "
                  f"{r['b_wall_ms']:7.1f}ms {r['b_cpu_ms']:7.1f}ms {r['ratio_wall']:8.2f}x "
                  f"{r['ratio_cpu']:7.2f}x")
        print("B: python -c pass, except for the bracket rows, where B is the same pair of "
              "calls by a session that is no worker (the guard alone)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
