"""The state's records: the product's reader against a msgspec port of the same models
(bench/records_port.py), on the same documents.

    .venv/bin/python bench/records.py [--runs K] [--tasks N]

Three figures each, for the product's records (`ours`: shared/state/models.py through
shared/state/store.py) and for the port (`port`):

- import and first use: a whole process that imports the records and reads and writes the
  golden tests/data/state_v2.json (against `python -c pass`, the same interpreter);
- reading a large state: a whole process that reads it, and the in-process median of
  reading its bytes into records (as store.load does: trusted bytes, no duplicate-key pass);
- writing it: the in-process median of the records back to bytes (as store.save does).

The large state is tests/data/state_v2.json scaled up: N tasks (default 120, some 190 KB
written compact) copied from its three with their ids changed, some with a symbol grant, a
checkpoint's own tree or a brief, so the fields written only when set are exercised. Both
sides must give the same bytes for it and for the golden state (checked before timing).
Whole processes run interleaved, one untimed warm-up round first; medians of K runs (wall
and CPU). Results: bench/results/records.json and a table on stdout.
"""

from __future__ import annotations

import copy
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.dont_write_bytecode = True
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import PYTHON, RESULTS, ROOT, log, write_json  # noqa: E402

GOLDEN = ROOT / "tests" / "data" / "state_v2.json"


# ---- the two sides: read bytes into records, write records to bytes -----------------------

def _ours() -> tuple[Any, Any]:
    from hunkwise.shared.state import store
    from hunkwise.shared.state.models import State

    def read(data: bytes) -> Any:
        return State.model_validate(store._trusted_loads(data))

    return read, store._dump


def _port() -> tuple[Any, Any]:
    import records_port

    return records_port.read, records_port.write


SIDES = {"ours": _ours, "port": _port}



# ---- the large state -----------------------------------------------------------------------

def large_state(n: int) -> bytes:
    """tests/data/state_v2.json with `n` tasks, written compact as the store writes it."""
    doc = json.loads(GOLDEN.read_bytes())
    models = list(doc["tasks"].values())
    tasks: dict[str, Any] = {}
    for i in range(n):
        t = copy.deepcopy(models[i % len(models)])
        tid = f"T{i + 1:04d}"
        t["id"] = tid
        t["title"] = f"{t['title']} {i}: " + "refine the parser's error paths " * (i % 4)
        t["notes"] = t["notes"] * (1 + i % 3)
        for g in t["grants"]:
            if g["kind"] == "range" and i % 5 == 0:
                g["symbol"] = f"func_{i}"
        if t.get("saved") is not None and i % 4 == 0:
            t["saved"]["own"] = "f" * 40
        if i % 6 == 0:
            t["brief"] = "Read docs/design.md first; keep the JSON documents as they are.\n" * 3
        if t.get("claimed"):
            t["claimed"] = {f"src/mod{i % 17}/{p}": ids for p, ids in t["claimed"].items()}
        tasks[tid] = t
    doc["tasks"] = tasks
    doc["sessions"] = {f"sess-20261201-0320-worker.{i}@vm": 1796095215.5 + i for i in range(n // 3)}
    doc["seq"] = {f"sig-2026120{d}": d * 7 for d in range(1, 9)}
    doc["signals"] = doc["signals"] * (n // 10 or 1)
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


# ---- the whole processes: each a `python -c` of its own, importing only what it needs ----------

# Import the records, read a file's bytes into them and write them back. `ours` writes with
# model_dump_json (store._dump would import the store, and with it git's door, which the port
# would not pay); its reading is store.load's: json.loads, then the reader.
CHILD = {
    "ours": ("import json, sys\n"
             "from hunkwise.shared.state.models import State\n"
             "s = State.model_validate(json.loads(open(sys.argv[1], 'rb').read()))\n"
             "WRITE"),
    "port": ("import sys\n"
             f"sys.path.insert(0, {str(HERE)!r})\n"
             "import records_port\n"
             "s = records_port.read(open(sys.argv[1], 'rb').read())\n"
             "WRITE"),
}
# msgspec takes get_type_hints from typing_extensions when that is installed (the test
# extras bring it, through mcp and pydantic; a user's install of hunkwise has none): the
# port as a user's install runs it, typing_extensions out of reach.
CHILD["port, no typing_extensions"] = (
    "import sys\n"
    "sys.modules['typing_extensions'] = None  # an import of it fails\n"
    + CHILD["port"])
WRITES = {"ours": "s.model_dump_json(by_alias=True)", "port": "records_port.write(s)",
          "port, no typing_extensions": "records_port.write(s)"}


def child_code(side: str, write: bool) -> str:
    return CHILD[side].replace("WRITE", WRITES[side] if write else "")


# What a hot command has loaded anyway, listed by running `coord status` in a repository
# with one task (hunkwise's own modules and msgspec left out): a child imports these first,
# then times the records' import and first use (read and write the golden state) itself.
# That is what the records add to a hot command.
LIST_MODULES = (
    "import sys\n"
    "from hunkwise.coordinator.cli import main\n"
    "main(['status', '--json', '--repo', sys.argv[1]])\n"
    "print(' '.join(m for m in sys.modules if not m.startswith(('hunkwise', 'msgspec', '__main__'))))\n")


def hot_code(side: str, preload: list[str]) -> str:
    body = CHILD[side].replace("WRITE", WRITES[side]).replace("import json, sys\n", "")
    return ("import sys, time, importlib\n"
            f"for m in {preload!r}:\n"
            "    try: importlib.import_module(m)\n"
            "    except Exception: pass\n"
            "import json\n"
            "t0 = time.perf_counter()\n"
            + body.replace("import sys\n", "") +
            "\nprint(round((time.perf_counter() - t0) * 1e3, 3))\n")


def hot_preload(tmp: Path) -> list[str]:
    import os

    repo = tmp / "repo"
    repo.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@b", "COORD_DIR": str(tmp / "coord")}
    for argv in (["git", "init", "-q"], ["git", "commit", "-q", "--allow-empty", "-m", "a"],
                 [str(PYTHON.parent / "coord"), "assign", "T1", "--title", "t", "--expect", "e",
                  "--write", "a.txt"]):
        subprocess.run(argv, cwd=repo, env=env, check=True, capture_output=True)
    out = subprocess.run([str(PYTHON), "-c", LIST_MODULES, str(repo)], cwd=repo, env=env,
                         check=True, capture_output=True, text=True).stdout
    return out.splitlines()[-1].split()


# ---- timing --------------------------------------------------------------------------------

def child_env(tmp: Path) -> dict[str, str]:
    """Children cache their bytecode (in `tmp`, not the source tree), as installed programs
    do: the warm-up round compiles, the timed ones read it."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    return env


def cpu_of_children() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def whole(cases: dict[str, list[str]], runs: int, env: dict[str, str]
          ) -> dict[str, dict[str, float]]:
    """Each case as its own process, interleaved round by round (the order rotating), one
    warm-up round: medians of wall and CPU seconds."""
    names = list(cases)
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    for r in range(-1, runs):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            c0, t0 = cpu_of_children(), time.perf_counter()
            subprocess.run(cases[name], check=True, stdin=subprocess.DEVNULL, env=env)
            dt, dc = time.perf_counter() - t0, cpu_of_children() - c0
            if r >= 0:
                wall[name].append(dt)
                cpu[name].append(dc)
    return {n: {"wall_ms": round(statistics.median(wall[n]) * 1e3, 2),
                "cpu_ms": round(statistics.median(cpu[n]) * 1e3, 2)} for n in names}


def inproc(fn: Any, runs: int) -> float:
    """The median of `runs` calls, in ms (after one untimed call)."""
    fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return round(statistics.median(times) * 1e3, 3)


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=21, help="runs per figure (default 21)")
    p.add_argument("--tasks", type=int, default=120, help="tasks in the large state")
    a = p.parse_args(argv)

    sides = {s: SIDES[s]() for s in SIDES}
    big = large_state(a.tasks)
    golden_compact = json.dumps(json.loads(GOLDEN.read_bytes()), ensure_ascii=False,
                                separators=(",", ":")).encode() + b"\n"
    for name, (read, write) in sides.items():
        for label, data in (("golden", golden_compact), ("large", big)):
            if write(read(data)) != data:
                raise SystemExit(f"{name}: the {label} state does not round-trip byte for byte")
    log(f"large state: {a.tasks} tasks, {len(big):,} bytes; both sides round-trip it")

    results: dict[str, Any] = {"bench": "records", "tasks": a.tasks, "bytes": len(big),
                               "runs": a.runs}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "state.json"
        path.write_bytes(big)
        golden = Path(tmp) / "golden.json"
        golden.write_bytes(golden_compact)
        py = str(PYTHON)
        cases = {"python -c pass": [py, "-c", "pass"]}
        for s in CHILD:
            cases[f"{s}: import + golden"] = [py, "-c", child_code(s, True), str(golden)]
            cases[f"{s}: import + read large"] = [py, "-c", child_code(s, False), str(path)]
        log(f"whole processes: {len(cases)} cases x {a.runs} runs")
        env = child_env(Path(tmp))
        results["whole"] = whole(cases, a.runs, env)
        preload = hot_preload(Path(tmp))
        hot: dict[str, list[float]] = {s: [] for s in CHILD}
        for r in range(-1, a.runs):
            for s in (list(CHILD) if r % 2 else list(CHILD)[::-1]):
                out = subprocess.run([str(PYTHON), "-c", hot_code(s, preload), str(golden)],
                                     check=True, capture_output=True, text=True, env=env).stdout
                if r >= 0:
                    hot[s].append(float(out.split()[-1]))
        results["in_hot_command"] = {s: round(statistics.median(v), 3) for s, v in hot.items()}

    states = {s: read(big) for s, (read, _write) in sides.items()}
    results["inproc"] = {s: {"read_ms": inproc(lambda r=r: r(big), a.runs * 3),
                             "write_ms": inproc(lambda w=w, st=states[s]: w(st), a.runs * 3)}
                         for s, (r, w) in sides.items()}

    w, ip = results["whole"], results["inproc"]
    base = w["python -c pass"]["cpu_ms"]
    print(f"{'case':34} {'wall ms':>9} {'cpu ms':>9} {'cpu over python':>16}")
    for name, v in w.items():
        print(f"{name:34} {v['wall_ms']:9.2f} {v['cpu_ms']:9.2f} {v['cpu_ms'] - base:16.2f}")
    print(f"\nimport + first use (golden) in a process that loaded what `coord status` loads "
          f"({len(preload)} modules):")
    for s, v in results["in_hot_command"].items():
        print(f"  {s}: {v:.2f} ms")
    print(f"\nin-process medians, {len(big):,} bytes, {a.tasks} tasks:")
    for s, v in ip.items():
        print(f"  {s}: read {v['read_ms']:.3f} ms, write {v['write_ms']:.3f} ms")
    if "ours" in ip and "port" in ip:
        print(f"  ours/port: read {ip['ours']['read_ms'] / ip['port']['read_ms']:.1f}x, "
              f"write {ip['ours']['write_ms'] / ip['port']['write_ms']:.1f}x")
    write_json(RESULTS / "records.json", results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
