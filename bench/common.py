"""The harness every bench script shares: a hermetic environment, a generated repository,
running the CLIs and timing them with medians, restoring state between runs, profiling, the
command line, and the report (tables, ratios to a floor, the machine, the JSON, the closing
lines).

Nothing here imports the product at module level: the benchmarks drive `coord` and `worker`
as users do, through their console scripts, so start-up cost is part of every figure.

- `run`: one process, its wall time and the CPU time of RUSAGE_CHILDREN around it.
- `run_ru`: one process and its wall time, CPU time and peak memory. The rusage comes from
  `os.wait4` on that very child, so it covers the process and every descendant it waited
  for (git). `ru_maxrss` is the largest RSS of any one process in that tree (the kernel's
  RUSAGE_BOTH rule), in KiB.
- `Restorer`: a frozen copy of a directory, put back before every run so that each run
  starts from an identical state.
- `cprofile_cli`, `git_trace`: cProfile a console script, or list the git processes a
  command runs, into bench/results/profile_<name>[_git].txt.
- `parse_bench_args` and `Bench`: the options every bench takes (--files, --runs, --quick,
  --profile, --keep, --out) and the frame of its `main`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

ROOT = Path(__file__).resolve().parent.parent
# The venv's bin directory: the console scripts `coord` and `worker` live there.
BIN = (ROOT / ".venv" / "bin") if (ROOT / ".venv" / "bin" / "coord").exists() else Path(sys.executable).parent
PYTHON = BIN / "python"
RESULTS = ROOT / "bench" / "results"

FIXED_DATE = "2026-01-01T00:00:00Z"


def log(msg: str) -> None:
    """Progress, on stderr: stdout is the bench's table and verdicts."""
    print(msg, file=sys.stderr, flush=True)


# ---- environment -----------------------------------------------------------------------

def hermetic_env(home: Path) -> dict[str, str]:
    """The user's environment minus every GIT_* and COORD_* variable, with HOME, XDG, git's
    system and global config, author, committer and dates pinned (as tests/conftest.py does).

    Bytecode caches go to a prefix inside `home` so running the bench never writes
    __pycache__ directories into the source tree.
    """
    home.mkdir(parents=True, exist_ok=True)
    (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "COORD_"))}
    env.update({
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"),
        "GIT_AUTHOR_NAME": "Bench Author",
        "GIT_AUTHOR_EMAIL": "author@example.com",
        "GIT_COMMITTER_NAME": "Bench Committer",
        "GIT_COMMITTER_EMAIL": "committer@example.com",
        "GIT_AUTHOR_DATE": FIXED_DATE,
        "GIT_COMMITTER_DATE": FIXED_DATE,
        "TZ": "UTC",
        "LC_ALL": "C",
        "PYTHONPYCACHEPREFIX": str(home / "pycache"),
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    })
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def enter_env(env: dict[str, str]) -> None:
    """Make `env` this process's whole environment: to run the product in-process as the
    sandbox's commands run (its git calls read os.environ), or to put the caller's back."""
    os.environ.clear()
    os.environ.update(env)


@dataclass
class Sandbox:
    """A temporary directory holding a HOME and a repository, with its environment."""

    root: Path
    repo: Path
    env: dict[str, str]
    keep: bool = False

    @classmethod
    def create(cls, keep: bool = False) -> Sandbox:
        root = Path(tempfile.mkdtemp(prefix="hunkwise-bench-"))
        env = hermetic_env(root / "home")
        repo = root / "repo"
        repo.mkdir()
        return cls(root=root, repo=repo, env=env, keep=keep)

    def close(self) -> None:
        if not self.keep:
            shutil.rmtree(self.root, ignore_errors=True)


# ---- running commands ------------------------------------------------------------------

@dataclass
class Run:
    argv: list[str]
    code: int
    stdout: bytes
    stderr: bytes
    seconds: float
    cpu: float  # user + system CPU seconds of the process and its children (git)

    @property
    def doc(self) -> Any:
        return json.loads(self.stdout)

    def check(self, *codes: int) -> Self:
        if self.code not in (codes or (0,)):
            raise RuntimeError(f"{' '.join(self.argv)} exited {self.code}:\n"
                               f"{self.stderr.decode(errors='replace')[-2000:]}\n"
                               f"{self.stdout.decode(errors='replace')[-2000:]}")
        return self


def run(argv: Sequence[str], cwd: Path, env: dict[str, str], input: bytes | None = None) -> Run:
    """Run one process to completion, output captured, and time it (wall clock)."""
    argv = [str(a) for a in argv]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(argv, cwd=cwd, env=env, input=input, capture_output=True,
                       stdin=None if input is not None else subprocess.DEVNULL)
    dt = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return Run(argv, p.returncode, p.stdout, p.stderr, dt, cpu)


@dataclass
class RunRU(Run):
    """A `Run` measured by `run_ru`: `cpu` is the process's and the children's it waited for."""

    maxrss_kb: int    # largest RSS of one process in that tree


def run_ru(argv: Sequence[Any], cwd: Path, env: dict[str, str],
           input: bytes | None = None) -> RunRU:
    """Run one process to completion, output captured, and time it with its own rusage
    (`os.wait4`): wall clock, user + system CPU, peak RSS."""
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


def wall_cpu(r: Run) -> tuple[float, float]:
    return r.seconds, r.cpu


def ru_step(sb: Sandbox, argv: Sequence[Any]) -> Callable[[int], tuple[float, float]]:
    """A `Step.run` that times `argv` in the sandbox's repository with `run_ru` (checked)."""
    return lambda i: wall_cpu(run_ru(argv, sb.repo, sb.env).check())


def git(sb: Sandbox, *args: str, input: bytes | None = None) -> bytes:
    return run(["git", *args], sb.repo, sb.env, input=input).check().stdout


def coord(sb: Sandbox, *args: str) -> Run:
    return run([BIN / "coord", *args, "--json"], sb.repo, sb.env)


def worker(sb: Sandbox, *args: str) -> Run:
    return run([BIN / "worker", *args, "--json"], sb.repo, sb.env)


# ---- state put back between runs -------------------------------------------------------

class Restorer:
    """Keep a pristine copy of `src` and put it back (rmtree + copytree, mtimes kept).

    With `sync` (the default) the copy's dirty pages are flushed after each restore."""

    def __init__(self, src: Path, store: Path, sync: bool = True) -> None:
        self.src, self.store, self.sync = src, store, sync
        shutil.copytree(src, store, symlinks=True, copy_function=shutil.copy2)

    def restore(self) -> float:
        t0 = time.perf_counter()
        shutil.rmtree(self.src)
        shutil.copytree(self.store, self.src, symlinks=True, copy_function=shutil.copy2)
        if self.sync:
            # Flush the copy's dirty pages now, untimed, so that an fsync in the timed command
            # does not pay for writing back the restore (ext4 commits the journal as a whole).
            os.sync()
        return time.perf_counter() - t0


# ---- timing ----------------------------------------------------------------------------

Sample = float | tuple[float, float]


@dataclass
class Timing:
    name: str
    samples: list[float] = field(default_factory=list)
    cpu_samples: list[float] = field(default_factory=list)
    note: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu_samples) if self.cpu_samples else float("nan")

    def add(self, sample: Sample) -> None:
        wall, cpu = sample if isinstance(sample, tuple) else (sample, float("nan"))
        self.samples.append(wall)
        if cpu == cpu:
            self.cpu_samples.append(cpu)

    def as_json(self, floor: float | None = None) -> dict[str, Any]:
        d: dict[str, Any] = {
            "median_s": round(self.median, 4),
            "min_s": round(min(self.samples), 4),
            "max_s": round(max(self.samples), 4),
            "runs": len(self.samples),
            "samples_s": [round(s, 4) for s in self.samples],
        }
        if floor:
            d["ratio_to_floor"] = round(self.median / floor, 2)
        if self.cpu_samples:
            d["cpu_median_s"] = round(self.cpu_median, 4)
            d["cpu_samples_s"] = [round(s, 4) for s in self.cpu_samples]
        if self.note:
            d["note"] = self.note
        return d


@dataclass
class Step:
    """One command measured in every round: `run(i)` returns the wall seconds of the part it
    times, or (wall, cpu) seconds (i is the round, negative for warm-up rounds);
    `before`/`after` run untimed around it."""

    name: str
    run: Callable[[int], Sample]
    before: Callable[[], None] | None = None
    after: Callable[[], None] | None = None
    warm: bool = True  # False: skip it in warm-up rounds (it consumes something)
    note: str = ""


def interleave(steps: Sequence[Step], rounds: int, warmup: int = 1,
               log: Callable[[str], None] | None = None) -> dict[str, Timing]:
    """Run every step once a round, `warmup` untimed rounds first. The order rotates each
    round, so background load and cache state fall on every command alike instead of on
    whichever ran in a bad stretch."""
    out = {s.name: Timing(s.name, note=s.note) for s in steps}
    for r in range(-warmup, rounds):
        shift = r % len(steps)
        for s in list(steps[shift:]) + list(steps[:shift]):
            if r < 0 and not s.warm:
                continue
            if s.before:
                s.before()
            dt = s.run(r)
            if s.after:
                s.after()
            if r >= 0:
                out[s.name].add(dt)
        if log:
            log(f"  round {'warm-up' if r < 0 else r + 1} done")
    return out


def timed(label: str, fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t0
    log(f"  {label}: {dt:.2f}s")
    return out, dt


# ---- the generated repository --------------------------------------------------------

WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
         "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo")


def file_text(d: int, f: int, lines: int) -> bytes:
    """~40 distinct lines of ~45 bytes: unique enough that -U0 hunks never coalesce."""
    rows = []
    for n in range(1, lines + 1):
        w = WORDS[(d * 7 + f * 3 + n) % len(WORDS)]
        rows.append(f"mod{d:02d} file{f:04d} line{n:03d} {w} value = {(d * 1000 + f * 40 + n) % 9973}\n")
    return "".join(rows).encode()


def dir_of(d: int) -> str:
    return f"src/mod{d:02d}"


def generate_repo(sb: Sandbox, n_files: int, n_dirs: int, lines: int = 40) -> dict[int, list[str]]:
    """Write `n_files` text files spread over `n_dirs` directories (each nested two more
    levels, ten files a leaf), commit them, and return {dir index: [paths]}.
    """
    layout: dict[int, list[str]] = {d: [] for d in range(n_dirs)}
    per = [n_files // n_dirs + (1 if d < n_files % n_dirs else 0) for d in range(n_dirs)]
    for d in range(n_dirs):
        for f in range(per[d]):
            leaf = f // 10
            rel = f"{dir_of(d)}/p{leaf // 5}/q{leaf % 5}/file{f:04d}.txt"
            p = sb.repo / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(file_text(d, f, lines))
            layout[d].append(rel)
    (sb.repo / "README.md").write_text("generated by bench/common.py\n")
    return layout


def commit_all(sb: Sandbox, message: str) -> None:
    git(sb, "init", "-q", "-b", "main")
    git(sb, "add", "-A")
    git(sb, "commit", "-q", "-m", message)
    # Files written in the same second as the index are "racily clean": git smudges them and
    # re-hashes them on every later status until the index is rewritten. Let the clock move
    # on, then refresh once, so every run below sees a settled index (as a real repo would).
    time.sleep(1.1)
    git(sb, "update-index", "-q", "--really-refresh")
    git(sb, "status", "--porcelain")


def edit_lines(path: Path, line_numbers: Sequence[int], tag: str) -> None:
    """Change each given (1-based) line in place: one -1/+1 hunk per non-adjacent line."""
    rows = path.read_bytes().split(b"\n")
    for n in line_numbers:
        rows[n - 1] = rows[n - 1] + f"  # edited: {tag}".encode()
    path.write_bytes(b"\n".join(rows))


def spread(total: int, n_files: int, lines: int) -> list[int]:
    """Per-file line numbers for `total` hunks over `n_files` files: non-adjacent lines."""
    per = -(-total // n_files)
    if per > lines // 2:
        raise ValueError(f"{total} hunks over {n_files} files of {lines} lines cannot stay apart")
    step = lines // per
    return [1 + step // 2 + i * step for i in range(per)]


def count_hunks(patch: bytes) -> int:
    return sum(1 for line in patch.split(b"\n") if line.startswith(b"@@ "))


# ---- profiling -------------------------------------------------------------------------

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
    log(f"  profile: {rel(out)}")
    return out


def run_traced(name: str, argv: Sequence[Any], cwd: Path,
               sb: Sandbox) -> tuple[RunRU, list[list[str]]]:
    """Run one command (checked) with GIT_TRACE2_PERF into the sandbox; return it and the
    trace's event lines split into their fields (lines of fewer than 9 fields left out)."""
    trace = sb.root / f"{name}.trace2"
    trace.unlink(missing_ok=True)
    r = run_ru(argv, cwd, dict(sb.env, GIT_TRACE2_PERF=str(trace))).check()
    lines = trace.read_text(errors="replace").splitlines() if trace.exists() else []
    fields = ([x.strip() for x in line.split("|")] for line in lines)
    return r, [p for p in fields if len(p) >= 9]


def trace_depth(p: list[str]) -> int:
    """The nesting of a trace line's process: 0 for one the command ran itself (d0), 1 for
    one a git process ran, and so on."""
    return int(p[1][1:]) if p[1][1:].isdigit() else 0


def trace_command(p: list[str]) -> str:
    """A `start` line's command line, without its `-c key=value` options."""
    return re.sub(r"(-c \S+ )+", "", p[8])


def git_trace(name: str, argv: Sequence[Any], cwd: Path, sb: Sandbox) -> tuple[Path, float, float]:
    """Run one CLI with GIT_TRACE2_PERF and list every git process it ran with its own
    elapsed time, into results/profile_<name>_git.txt. Returns (file, wall s, git s)."""
    r, trace = run_traced(name, argv, cwd, sb)
    cmds: list[list[Any]] = []
    for p in trace:
        depth = trace_depth(p)
        if p[3] == "start":
            cmds.append([trace_command(p), None, depth])
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
    log(f"  git trace: {rel(out)} (wall {r.seconds:.3f}s, in git {git_s:.3f}s)")
    return out, r.seconds, git_s


# ---- the command line ------------------------------------------------------------------

def parse_bench_args(
    argv: list[str] | None, doc: str, out: str, *,
    runs: tuple[int, int],
    files: tuple[int, int] | None = None,
    runs_help: str | None = None,
    files_help: str | None = None,
    quick_help: str | None = None,
    profile_help: str | None = None,
    keep_help: str = "keep the sandbox and print its path",
    before_runs: Callable[[argparse.ArgumentParser], object] | None = None,
    after_quick: Callable[[argparse.ArgumentParser], object] | None = None,
    check: Callable[[argparse.ArgumentParser, argparse.Namespace], object] | None = None,
    raw: bool = False,
) -> argparse.Namespace:
    """The options of a bench script, in this order: --files (when `files` is given), the
    script's own (`before_runs`), --runs, --quick, more of its own (`after_quick`), --profile
    (when `profile_help` is given), --keep, --out (default results/`out`). The description
    is the first paragraph of `doc`.

    `runs` and `files` are (default, with --quick): an option not given takes one of them.
    The help texts not given are made from them. `check(parser, args)` may reject the
    combination with `parser.error`."""
    kw: dict[str, Any] = {"formatter_class": argparse.RawDescriptionHelpFormatter} if raw else {}
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0], **kw)
    if files:
        ap.add_argument("--files", type=int, default=None,
                        help=files_help or f"files in the repo (default {files[0]}; quick {files[1]})")
    if before_runs:
        before_runs(ap)
    ap.add_argument("--runs", type=int, default=None,
                    help=runs_help or f"timed runs (default {runs[0]}; quick {runs[1]})")
    ap.add_argument("--quick", action="store_true",
                    help=quick_help or (f"{files[1]:,} files, " if files else "") + f"{runs[1]} runs")
    if after_quick:
        after_quick(ap)
    if profile_help:
        ap.add_argument("--profile", action="store_true", help=profile_help)
    ap.add_argument("--keep", action="store_true", help=keep_help)
    ap.add_argument("--out", type=Path, default=RESULTS / out)
    a = ap.parse_args(argv)
    if files:
        a.files = a.files or (files[1] if a.quick else files[0])
    a.runs = a.runs or (runs[1] if a.quick else runs[0])
    if check:
        check(ap, a)
    return a


# ---- reporting -------------------------------------------------------------------------

def machine_info() -> dict[str, Any]:
    git_version = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
    return {
        "python": platform.python_version(),
        "git": git_version,
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def machine(load_start: list[float], product: bool = True) -> dict[str, Any]:
    """`machine_info()` with the load average at the start and now, and (with `product`) the
    product's commit and its uncommitted edits at run time."""
    m = machine_info()
    m["loadavg_start"] = load_start
    m["loadavg_end"] = loadavg()
    if not product:
        return m
    # The product as measured: its commit, and any uncommitted edits to it at run time.
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                          check=False)
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "shared", "inbox", "coordinator",
                            "worker"], cwd=ROOT, capture_output=True, text=True, check=False)
    m["product_commit"] = head.stdout.strip()
    m["product_uncommitted"] = [x[3:] for x in dirty.stdout.splitlines() if x]
    return m


def rel(p: Path) -> str:
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p)


def print_table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    cells = [list(header)] + [list(r) for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = []
    for j, r in enumerate(cells):
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths))).rstrip())
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def write_json(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    os.replace(tmp, path)


def vs_floor(t: Timing, floor: Timing, in_ms: bool = False) -> list[str]:
    """The cells median, x floor, cpu, cpu x floor of `t` against `floor`: seconds to three
    places, or (`in_ms`) milliseconds to one."""
    fm, fc = floor.median, floor.cpu_median
    if in_ms:
        return [f"{t.median * 1000:.1f}", f"{t.median / fm:.2f}",
                f"{t.cpu_median * 1000:.1f}", f"{t.cpu_median / fc:.2f}"]
    return [f"{t.median:.3f}", f"{t.median / fm:.2f}", f"{t.cpu_median:.3f}",
            f"{t.cpu_median / fc:.2f}"]


def floor_ratios(t: Timing, floor: Timing) -> dict[str, float]:
    return {"ratio_to_floor": round(t.median / floor.median, 2),
            "cpu_ratio_to_floor": round(t.cpu_median / floor.cpu_median, 2)}


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def aim_line(label: str, t: Timing, floor: Timing, within: float, met: bool) -> str:
    """The headline: `t` as a multiple of the floor (wall, and CPU) against the aim."""
    return (f"\n{label}: {t.median:.3f}s = {t.median / floor.median:.2f}x the floor "
            f"({t.cpu_median / floor.cpu_median:.2f}x in CPU); aim within {within:g}x: "
            f"{verdict(met)}")


def mib(kib: Sequence[int]) -> str:
    """The largest of the peak RSS figures (KiB) in MiB, or "-" when there are none."""
    return f"{max(kib) / 1024:.0f}" if kib else "-"


def load_line(m: dict[str, Any]) -> str:
    return (f"load average: {m['loadavg_start']} at start, {m['loadavg_end']} at the end "
            f"({m['cpus']} cpus)")


class Bench:
    """The frame of a bench script's run: its start (the clock and the load average) and
    its sandbox, removed at the end unless kept.

        with Bench(keep=a.keep) as b:     # or b = Bench(...); try: ... finally: b.close()
            ...
            doc = {..., "machine": b.machine(), ..., "total_s": b.total_s()}
            write_json(a.out, doc)
            ...
            b.finish(a.out, doc)
    """

    def __init__(self, keep: bool = False) -> None:
        self.t_start = time.perf_counter()
        self.load_start = loadavg()
        self.sb = Sandbox.create(keep=keep)

    def __enter__(self) -> Bench:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sb.close()

    def machine(self, product: bool = True) -> dict[str, Any]:
        return machine(self.load_start, product=product)

    def total_s(self) -> float:
        return round(time.perf_counter() - self.t_start, 1)

    def finish(self, out: Path, doc: dict[str, Any], home: bool = False) -> None:
        """The closing lines: where the results went and how long the run took; where the
        sandbox is, when kept (and, with `home`, its HOME)."""
        print(f"wrote {rel(out)} in {doc['total_s']:.0f}s")
        if self.sb.keep:
            print(f"kept: {self.sb.root}" + (f"  (env: HOME={self.sb.env['HOME']})" if home else ""))
