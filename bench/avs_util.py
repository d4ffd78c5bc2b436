"""Helpers for bench/accept.py, bench/verify.py and bench/snapshot.py (on top of common.py).

- `run_ru`: run one process and get its wall time, CPU time and peak memory. The rusage
  comes from `os.wait4` on that very child, so it covers the process and every descendant
  it waited for (git). `ru_maxrss` is the largest RSS of any one process in that tree
  (the kernel's RUSAGE_BOTH rule), in KiB.
- `Restorer`: a frozen copy of a directory, put back before every run so that each run
  starts from an identical state.
- `cprofile_cli`: cProfile a console script into bench/results/profile_<name>.txt.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import BIN, PYTHON, RESULTS, ROOT, Sandbox, machine_info


@dataclass
class RunRU:
    argv: list[str]
    code: int
    stdout: bytes
    stderr: bytes
    seconds: float
    cpu: float        # user + system of the process and the children it waited for
    maxrss_kb: int    # largest RSS of one process in that tree

    def check(self, *codes: int) -> RunRU:
        if self.code not in (codes or (0,)):
            raise RuntimeError(f"{' '.join(self.argv)} exited {self.code}:\n"
                               f"{self.stderr.decode(errors='replace')[-2000:]}\n"
                               f"{self.stdout.decode(errors='replace')[-2000:]}")
        return self

    @property
    def doc(self) -> Any:
        import json
        return json.loads(self.stdout)


def run_ru(argv: Sequence[Any], cwd: Path, env: dict[str, str],
           input: bytes | None = None) -> RunRU:
    argv = [str(a) for a in argv]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.TemporaryFile() as fin:
        stdin: Any = subprocess.DEVNULL
        if input is not None:
            fin.write(input)
            fin.seek(0)
            stdin = fin
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, cwd=cwd, env=env, stdin=stdin, stdout=out, stderr=err)
        _, status, ru = os.wait4(p.pid, 0)
        dt = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return RunRU(argv, p.returncode, out.read(), err.read(), dt,
                     ru.ru_utime + ru.ru_stime, ru.ru_maxrss)


class Restorer:
    """Keep a pristine copy of `src` and put it back (rmtree + copytree, mtimes kept)."""

    def __init__(self, src: Path, store: Path) -> None:
        self.src, self.store = src, store
        shutil.copytree(src, store, symlinks=True, copy_function=shutil.copy2)

    def restore(self) -> float:
        t0 = time.perf_counter()
        shutil.rmtree(self.src)
        shutil.copytree(self.store, self.src, symlinks=True, copy_function=shutil.copy2)
        # Flush the copy's dirty pages now, untimed, so that an fsync in the timed command
        # does not pay for writing back the restore (ext4 commits the journal as a whole).
        os.sync()
        return time.perf_counter() - t0


def wall_cpu(r: RunRU) -> tuple[float, float]:
    return r.seconds, r.cpu


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def machine(load_start: list[float]) -> dict[str, Any]:
    m = machine_info()
    m["loadavg_start"] = load_start
    m["loadavg_end"] = loadavg()
    # The product as measured: its commit, and any uncommitted edits to it at run time.
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                          check=False)
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "shared", "inbox", "coordinator",
                            "worker"], cwd=ROOT, capture_output=True, text=True, check=False)
    m["product_commit"] = head.stdout.strip()
    m["product_uncommitted"] = [x[3:] for x in dirty.stdout.splitlines() if x]
    return m


def cprofile_cli(name: str, argv: Sequence[Any], cwd: Path, sb: Sandbox, top: int = 35) -> Path:
    """cProfile one CLI run (console script under BIN) into results/profile_<name>.txt."""
    import pstats

    RESULTS.mkdir(parents=True, exist_ok=True)
    raw = sb.root / f"{name}.prof"
    script = BIN / argv[0]
    r = run_ru([PYTHON, "-m", "cProfile", "-o", raw, script, *argv[1:]], cwd, sb.env)
    out = RESULTS / f"profile_{name}.txt"
    with open(out, "w") as f:
        f.write(f"# cProfile of: {' '.join(str(a) for a in argv)}  (exit {r.code}, "
                f"{r.seconds:.3f}s wall under the profiler)\n")
        st = pstats.Stats(str(raw), stream=f)
        st.strip_dirs().sort_stats("cumulative").print_stats(top)
        st.sort_stats("tottime").print_stats(20)
    return out


def git_trace(name: str, argv: Sequence[Any], cwd: Path, sb: Sandbox) -> tuple[Path, float, float]:
    """Run one CLI with GIT_TRACE2_PERF and list every git process it ran with its own
    elapsed time, into results/profile_<name>_git.txt. Returns (file, wall s, git s)."""
    import re

    trace = sb.root / f"{name}.trace2"
    trace.unlink(missing_ok=True)
    r = run_ru(argv, cwd, dict(sb.env, GIT_TRACE2_PERF=str(trace))).check()
    cmds: list[list[Any]] = []
    for line in trace.read_text(errors="replace").splitlines():
        p = [x.strip() for x in line.split("|")]
        if len(p) < 9:
            continue
        depth = int(p[1][1:]) if p[1][1:].isdigit() else 0
        if p[3] == "start":
            cmds.append([re.sub(r"(-c \S+ )+", "", p[8]), None, depth])
        elif p[3] == "exit":
            # The exit closes the newest open process of its nesting depth (d1 = a child
            # that a git process ran itself, e.g. the reset --hard of worktree add).
            for c in reversed(cmds):
                if c[1] is None and c[2] == depth:
                    c[1] = float(p[5])
                    break
    git_s = sum(c[1] or 0.0 for c in cmds if c[2] == 0)
    out = RESULTS / f"profile_{name}_git.txt"
    header = (f"# git processes run by: {' '.join(str(a) for a in argv[:3])} ... "
              f"(wall {r.seconds * 1000:.0f} ms; in git {git_s * 1000:.0f} ms; "
              f"{sum(1 for c in cmds if c[2] == 0)} processes; the rest is Python; "
              "indented: processes a git process ran itself, included in its time)")
    lines = [header]
    lines += [f"{(t or 0) * 1000:8.1f} ms  {'    ' * d}{c[:150]}" for c, t, d in cmds]
    RESULTS.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    return out, r.seconds, git_s


def rel(p: Path) -> str:
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)


def ms(x: float) -> str:
    return f"{x * 1000:.0f}"
