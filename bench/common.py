"""Shared helpers for the hunkwise benchmarks: a hermetic environment, a generated repository,
running the CLIs, and timing with medians.

Nothing here imports the product at module level: the benchmarks drive `coord` and `worker`
as users do, through their console scripts, so start-up cost is part of every figure.
"""

from __future__ import annotations

import json
import os
import platform
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
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# The venv's bin directory: the console scripts `coord` and `worker` live there.
BIN = (ROOT / ".venv" / "bin") if (ROOT / ".venv" / "bin" / "coord").exists() else Path(sys.executable).parent
PYTHON = BIN / "python"
RESULTS = ROOT / "bench" / "results"

FIXED_DATE = "2026-01-01T00:00:00Z"


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

    def check(self, *codes: int) -> Run:
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


def git(sb: Sandbox, *args: str, input: bytes | None = None) -> bytes:
    return run(["git", *args], sb.repo, sb.env, input=input).check().stdout


def coord(sb: Sandbox, *args: str) -> Run:
    return run([BIN / "coord", *args, "--json"], sb.repo, sb.env)


def worker(sb: Sandbox, *args: str) -> Run:
    return run([BIN / "worker", *args, "--json"], sb.repo, sb.env)


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
    print(f"  {label}: {dt:.2f}s", file=sys.stderr, flush=True)
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
