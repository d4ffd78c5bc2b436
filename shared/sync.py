"""Machines that coordinate through a git remote they already share: no server of ours.

Each machine publishes only its own records, as one commit chain under
`refs/hunkwise/m/<machine>/records`; every sync adds a commit whose parent is the last
one, so a push is always a fast-forward of a ref no other machine writes (never forced,
never in conflict). Its tree:

    signals/<sig-id>@<machine>        a signal one of its sessions (or its coordinator) sent
    checkpoints/<key>                 a checkpoint or handoff of one of its sessions
    reports/<inbox name>/report.json  a report one of its sessions delivered, with
    reports/<inbox name>/snapshot     the report's snapshot tree and
    reports/<inbox name>/base         its base commit's tree (so both travel with the push)
    tasks.json                        the coordinator's machine only: its tasks and claims

A fetch copies every machine's chain to `refs/hunkwise/remote/<machine>/records`. Nothing
read from there is trusted: each record is parsed as strictly as a report in the inbox
(size caps, duplicate keys, NaN, the pydantic schema), its id or session must name the
machine whose ref holds it, and what fails is quarantined with its reason. The machine
that holds a task in its own state is the one authority for it: it applies remote requests
(an audit verdict) at its next sync under its lock; other machines keep a mirror of its
published tasks, replaced at every sync.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import git, store
from .context import Ctx, machine_name, session_role
from .errors import CoordError, GitError, UsageError
from .models import SESSION_RE, TASK_ID_RE, Checkpoint, Report, Signal, Task

OWN = "refs/hunkwise/m"
SEEN = "refs/hunkwise/remote"
MAX_RECORD_BYTES = 16 * 1024 * 1024
# Finished tasks stay in the published table this long, so other machines see the outcome.
KEEP_FINISHED_S = 7 * 86400
# Reports older than this leave the published tree (their objects stay in the chain's
# history until the chain is compacted; see README "Across machines").
KEEP_REPORTS_S = 14 * 86400
_SIG_ID_RE = re.compile(r"^sig-\d{8}-\d{3,9}@(?P<m>[A-Za-z0-9_-]{1,64})$")
_REPORT_NAME_RE = re.compile(r"^(?P<t>\d{1,20})\.P\d+R[0-9a-f]+\.[A-Za-z0-9_.-]+,"
                             r"task=(?P<task>[A-Za-z0-9_.-]{1,64}),rev=(?P<rev>\d{1,9})$")
_MACHINE_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_KEY_RE = re.compile(r"^[A-Za-z0-9_.@|-]{1,300}$")


def own_ref(machine: str) -> str:
    return f"{OWN}/{machine}/records"


def seen_ref(machine: str) -> str:
    return f"{SEEN}/{machine}/records"


def machine_of(who: str | None) -> str | None:
    """The machine a session id or `<role>@<machine>` names (None when it names none)."""
    if not who or "@" not in who:
        return None
    return who.rpartition("@")[2]


# ---- local bookkeeping ---------------------------------------------------------------------

def _sync_dir(ctx: Ctx) -> Path:
    d = ctx.lay.root / "sync"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _load_json(path: Path) -> dict[str, Any]:
    try:
        doc = store.strict_json_loads(path.read_bytes())
    except FileNotFoundError:
        return {}
    except ValueError:
        return {}  # our own bookkeeping, rebuilt from the refs at the next sync
    return doc if isinstance(doc, dict) else {}


def _save_json(path: Path, doc: dict[str, Any]) -> None:
    store.atomic_write(path, json.dumps(doc, indent=1, sort_keys=True).encode())


def mirror(ctx: Ctx) -> dict[str, Any]:
    """`{"tasks": {id: machine}, "ranges_at": {machine: commit}}`: tasks this machine holds
    only as a copy of another machine's published table."""
    doc = _load_json(ctx.lay.root / "sync" / "mirror.json")
    doc.setdefault("tasks", {})
    doc.setdefault("ranges_at", {})
    return doc


def is_mirrored(ctx: Ctx, task_id: str) -> bool:
    return task_id in mirror(ctx)["tasks"]


# ---- git objects ---------------------------------------------------------------------------

def _mktree(repo: Path, entries: dict[str, tuple[str, str]]) -> str:
    """A tree of {name: (mode, oid)}; mode 040000 entries are trees."""
    lines = []
    for name, (mode, oid) in sorted(entries.items()):
        kind = "tree" if mode == "040000" else "blob"
        lines.append(f"{mode} {kind} {oid}\t".encode() + name.encode() + b"\0")
    return git.run(repo, "mktree", "-z", input=b"".join(lines)).decode().strip()


def _ls(repo: Path, treeish: str) -> dict[str, tuple[str, str]]:
    """{name: (mode, oid)} of one tree level; empty when it does not exist."""
    rc, out = git.run_rc(repo, "ls-tree", "-z", treeish)
    if rc != 0:
        return {}
    found: dict[str, tuple[str, str]] = {}
    for rec in out.split(b"\0"):
        if not rec:
            continue
        meta, _, name = rec.partition(b"\t")
        mode, _kind, oid = meta.decode().split(" ")
        found[name.decode("utf-8", "surrogateescape")] = (mode, oid)
    return found


def _exists(repo: Path, oid: str | None) -> bool:
    if not oid:
        return False
    return git.run_rc(repo, "cat-file", "-e", oid)[0] == 0


def _ref(repo: Path, ref: str) -> str | None:
    rc, out = git.run_rc(repo, "rev-parse", "--verify", "-q", ref + "^{commit}")
    return out.decode().strip() if rc == 0 else None


def _dump(obj: Any) -> bytes:
    return json.dumps(obj, indent=1, sort_keys=True).encode()


# ---- publish -------------------------------------------------------------------------------

def _is_authority(ctx: Ctx, state: Any) -> list[Task]:
    """The tasks this machine holds as the authority (not as a mirror)."""
    mirrored = mirror(ctx)["tasks"]
    return [t for t in state.tasks.values() if t.id not in mirrored]


def _report_records(ctx: Ctx, me: str, current: dict[str, tuple[str, str]]
                    ) -> tuple[dict[str, tuple[str, str]], list[tuple[str, bytes, Report]]]:
    """Reports delivered by this machine's sessions: kept ({name: entry}) and new ones."""
    from hunkwise import inbox

    keep: dict[str, tuple[str, str]] = {}
    fresh: list[tuple[str, bytes, Report]] = []
    cutoff = (store.now() - KEEP_REPORTS_S) * 1e9
    for folder in ("new", "cur"):
        entries, _odd = inbox.entries(ctx.lay.inbox, folder)
        for e in entries:
            if e.time_ns < cutoff:
                continue
            if e.name in current:
                keep[e.name] = current[e.name]
                continue
            try:
                report = inbox.read_report(e.path)
            except UsageError:
                continue  # the coordinator quarantines it when it reads it
            if machine_of(report.session) != me:
                continue  # delivered here on another machine's behalf, or imported
            fresh.append((e.name, e.path.read_bytes(), report))
    return keep, fresh


def publish(ctx: Ctx) -> str | None:
    """Write this machine's records as a new commit of its chain; return the commit (or
    the unchanged one, or None when there is nothing to publish)."""
    repo, me = ctx.repo, machine_name()
    ref = own_ref(me)
    for _ in range(5):
        state = store.load(ctx.lay)
        old = _ref(repo, ref)
        parent = old or _ref(repo, seen_ref(me))  # a fresh clone continues its own chain
        top = _ls(repo, parent) if parent else {}
        current_reports = _ls(repo, f"{parent}:reports") if parent and "reports" in top else {}

        blobs: dict[str, bytes] = {}
        for sig in state.signals:
            if "@" in sig.id or machine_of(sig.sender) != me:
                continue  # imported, or sent by nobody of this machine
            pub = sig.model_copy(update={"id": f"{sig.id}@{me}", "state": "pending", "acked_by": []})
            blobs[f"signals/{pub.id}"] = _dump(pub.model_dump(mode="json", by_alias=True))
        for key, cp in state.checkpoints.items():
            if machine_of(cp.session) == me and _KEY_RE.fullmatch(key):
                blobs[f"checkpoints/{key}"] = _dump(cp.model_dump(mode="json"))
        own_tasks = _is_authority(ctx, state)
        if own_tasks:
            now = store.now()
            shown = [t for t in own_tasks if t.active or now - t.updated_at < KEEP_FINISHED_S]
            blobs["tasks.json"] = _dump({"machine": me, "ranges_at": state.ranges_at,
                                         "tasks": [t.model_dump(mode="json") for t in shown]})
        keep, fresh = _report_records(ctx, me, current_reports)
        names = list(blobs)
        oids = git.hash_blobs(repo, [blobs[n] for n in names]
                              + [data for _n, data, _r in fresh])
        by_name = dict(zip(names, oids[:len(names)], strict=True))
        reports = dict(keep)
        for (name, _data, report), oid in zip(fresh, oids[len(names):], strict=True):
            entry = {"report.json": ("100644", oid)}
            if _exists(repo, report.snapshot):
                entry["snapshot"] = ("040000", report.snapshot)
            if report.base_commit and _exists(repo, report.base_commit):
                entry["base"] = ("040000", git.run(repo, "rev-parse",
                                                   f"{report.base_commit}^{{tree}}").decode().strip())
            reports[name] = ("040000", _mktree(repo, entry))
        root: dict[str, tuple[str, str]] = {}
        for folder in ("signals", "checkpoints"):
            sub = {n.split("/", 1)[1]: ("100644", o) for n, o in by_name.items()
                   if n.startswith(folder + "/")}
            if sub:
                root[folder] = ("040000", _mktree(repo, sub))
        if reports:
            root["reports"] = ("040000", _mktree(repo, reports))
        if "tasks.json" in by_name:
            root["tasks.json"] = ("100644", by_name["tasks.json"])
        if not root and parent is None:
            return None
        tree = _mktree(repo, root)
        if parent and git.run(repo, "rev-parse", f"{parent}^{{tree}}").decode().strip() == tree:
            if old is None:
                git.run(repo, "update-ref", ref, parent, git.null_oid(repo))
            return parent
        env = {"GIT_AUTHOR_NAME": "hunkwise", "GIT_AUTHOR_EMAIL": f"hunkwise@{me}",
               "GIT_COMMITTER_NAME": "hunkwise", "GIT_COMMITTER_EMAIL": f"hunkwise@{me}"}
        args = ["commit-tree", tree, "-m", f"hunkwise records of {me}"]
        if parent:
            args[2:2] = ["-p", parent]
        commit = git.run(repo, *args, env=env).decode().strip()
        # Compare-and-swap: another command of this machine may have published meanwhile.
        rc, _ = git.run_rc(repo, "update-ref", ref, commit, old or git.null_oid(repo))
        if rc == 0:
            return commit
    raise CoordError(f"{ref} kept moving while publishing; try again")


# ---- push and fetch ------------------------------------------------------------------------

def remote_name(ctx: Ctx, given: str | None = None) -> str | None:
    return given or ctx.config.remote.name


def _git_net(ctx: Ctx, *args: str) -> str | None:
    """Run a push or fetch; None when it worked, else the reason (a warning, never fatal)."""
    try:
        git.run(ctx.repo, *args)
    except GitError as e:
        text = e.stderr.decode("utf-8", "replace").strip().splitlines()
        return (text[-1] if text else e.message)[:300]
    return None


def push(ctx: Ctx, remote: str) -> str | None:
    ref = own_ref(machine_name())
    if _ref(ctx.repo, ref) is None:
        return None
    # Never forced: only this machine writes this ref, and each commit has the last as parent.
    return _git_net(ctx, "push", "--quiet", "--no-verify", remote, f"{ref}:{ref}")


def fetch(ctx: Ctx, remote: str) -> str | None:
    return _git_net(ctx, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", remote,
                    f"+{OWN}/*:{SEEN}/*")


# ---- apply what other machines published ---------------------------------------------------

@dataclass
class Applied:
    signals: list[str] = field(default_factory=list)
    verdicts: list[str] = field(default_factory=list)
    tasks: list[str] = field(default_factory=list)
    checkpoints: list[str] = field(default_factory=list)
    reports: list[str] = field(default_factory=list)
    quarantined: list[dict[str, str]] = field(default_factory=list)

    def public(self) -> dict[str, Any]:
        return {"signals": self.signals, "verdicts": self.verdicts, "tasks": self.tasks,
                "checkpoints": self.checkpoints, "reports": self.reports,
                "quarantined": self.quarantined}


def remote_machines(repo: Path) -> dict[str, str]:
    """{machine: commit} of every fetched chain."""
    out = git.run(repo, "for-each-ref", "--format=%(refname) %(objectname)", f"{SEEN}/")
    found: dict[str, str] = {}
    for line in out.decode().split("\n"):
        m = re.fullmatch(rf"{SEEN}/([^/]+)/records ([0-9a-f]+)", line)
        if m and _MACHINE_RE.fullmatch(m[1]):
            found[m[1]] = m[2]
    return found


def _quarantine(ctx: Ctx, machine: str, path: str, data: bytes, reason: str,
                applied: Applied) -> None:
    from hunkwise import inbox

    name = f"remote-{machine}-" + re.sub(r"[^A-Za-z0-9_.,=@-]", "_", path)[:200]
    tmp = ctx.lay.inbox / "tmp" / name
    tmp.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_bytes(data[:MAX_RECORD_BYTES])
    inbox.quarantine(tmp, f"from {machine} ({path}): {reason}")
    applied.quarantined.append({"machine": machine, "record": path, "reason": reason})


def _parse(data: bytes, model: Any, what: str) -> Any:
    if len(data) > MAX_RECORD_BYTES:
        raise UsageError(f"{what}: over the {MAX_RECORD_BYTES} byte limit")
    try:
        doc = store.strict_json_loads(data)
    except (ValueError, RecursionError) as e:
        raise UsageError(f"{what}: not valid JSON ({str(e)[:200]})") from None
    try:
        return model.model_validate(doc)
    except ValueError as e:
        lines = str(e).splitlines()
        raise UsageError(f"{what}: does not match the schema "
                         f"({'; '.join(lines[1:3])[:300]})") from None


def _read_report(ctx: Ctx, name: str, data: bytes) -> Report:
    """The same strict reading as a report in the inbox (inbox.read_report on a file)."""
    from hunkwise import inbox

    tmp = ctx.lay.inbox / "tmp" / f".remote-{os.getpid()}-{name}"
    tmp.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_bytes(data[:inbox.MAX_REPORT_BYTES + 1])
    try:
        return inbox.read_report(tmp)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def apply_remote(ctx: Ctx) -> Applied:
    """Read every other machine's fetched records and apply what is new and sound."""
    applied = Applied()
    me = machine_name()
    with store.locked(ctx.lay, name="sync.lock"):
        seen_path = _sync_dir(ctx) / "seen.json"
        seen = _load_json(seen_path)
        for machine, commit in sorted(remote_machines(ctx.repo).items()):
            if machine == me:
                continue
            done = seen.get(machine, {})
            if done.get("commit") == commit:
                continue
            records = set(done.get("records", []))
            now_records = _apply_machine(ctx, machine, commit, records, applied)
            seen[machine] = {"commit": commit, "records": sorted(now_records)}
        _save_json(seen_path, seen)
    return applied


def _apply_machine(ctx: Ctx, machine: str, commit: str, done: set[str],
                   applied: Applied) -> set[str]:
    repo = ctx.repo
    top = _ls(repo, commit)
    listing: dict[str, str] = {}  # record path -> oid
    for folder in ("signals", "checkpoints", "reports"):
        if folder in top:
            for name, (_mode, oid) in _ls(repo, f"{commit}:{folder}").items():
                listing[f"{folder}/{name}"] = oid
    if "tasks.json" in top:
        listing["tasks.json"] = top["tasks.json"][1]
    todo = {p: o for p, o in listing.items() if f"{p} {o}" not in done}
    report_trees = {p: _ls(repo, o) for p, o in todo.items() if p.startswith("reports/")}
    blob_ids = [o for p, o in todo.items() if not p.startswith("reports/")]
    blob_ids += [t["report.json"][1] for t in report_trees.values() if "report.json" in t]
    blobs = git.cat_blobs(repo, blob_ids) if blob_ids else {}

    signals: list[Signal] = []
    checkpoints: dict[str, Checkpoint] = {}
    verdicts: list[tuple[str, bytes, Report]] = []
    table: dict[str, Any] | None = None
    for path, oid in sorted(todo.items()):
        kind, _, name = path.partition("/")
        data = blobs.get(oid, b"")
        try:
            if kind == "signals":
                sig = _parse(data, Signal, path)
                m = _SIG_ID_RE.fullmatch(sig.id)
                if sig.id != name or m is None or m["m"] != machine:
                    raise UsageError(f"signal id {sig.id!r} is not one of {machine}'s")
                if machine_of(sig.sender) != machine:
                    raise UsageError(f"sender {sig.sender!r} is not on {machine}")
                from .signals import check_target

                check_target(sig.to)
                signals.append(sig)
            elif kind == "checkpoints":
                cp = _parse(data, Checkpoint, path)
                if machine_of(cp.session) != machine or not SESSION_RE.fullmatch(cp.session):
                    raise UsageError(f"session {cp.session!r} is not on {machine}")
                if not _KEY_RE.fullmatch(name) or not TASK_ID_RE.fullmatch(cp.task):
                    raise UsageError(f"malformed checkpoint key {name!r}")
                checkpoints[name] = cp
            elif kind == "reports":
                entry = report_trees[path]
                if "report.json" not in entry:
                    raise UsageError("no report.json")
                data = blobs[entry["report.json"][1]]
                m = _REPORT_NAME_RE.fullmatch(name)
                if m is None:
                    raise UsageError(f"{name}: not a report file name")
                report = _read_report(ctx, name, data)
                if report.session is None or not SESSION_RE.fullmatch(report.session) \
                        or machine_of(report.session) != machine:
                    raise UsageError(f"session {report.session!r} is not on {machine}")
                if report.task_id != m["task"] or report.revision != int(m["rev"]):
                    raise UsageError(f"name says {m['task']} r{m['rev']}, content says "
                                     f"{report.task_id} r{report.revision}")
                if report.kind == "review":
                    verdicts.append((name, data, report))
                applied.reports.append(f"{machine}/{name}")
            elif path == "tasks.json":
                table = _parse_table(data, machine)
            else:
                raise UsageError("unknown record")
        except UsageError as e:
            _quarantine(ctx, machine, path, data, e.message, applied)
        done.add(f"{path} {oid}")
    _apply_state(ctx, machine, signals, checkpoints, verdicts, table, applied)
    # What left the published tree is forgotten here too: the bookkeeping stays small.
    return {r for r in done if r.split(" ", 1)[0] in listing}


def _parse_table(data: bytes, machine: str) -> dict[str, Any]:
    if len(data) > MAX_RECORD_BYTES:
        raise UsageError("tasks.json: over the size limit")
    try:
        doc = store.strict_json_loads(data)
    except (ValueError, RecursionError) as e:
        raise UsageError(f"tasks.json: not valid JSON ({str(e)[:200]})") from None
    if not isinstance(doc, dict) or set(doc) != {"machine", "ranges_at", "tasks"} \
            or doc["machine"] != machine or not isinstance(doc["tasks"], list):
        raise UsageError(f"tasks.json: not a task table of {machine}")
    ranges_at = doc["ranges_at"]
    if ranges_at is not None and not (isinstance(ranges_at, str)
                                      and re.fullmatch(r"[0-9a-f]{40}([0-9a-f]{24})?", ranges_at)):
        raise UsageError("tasks.json: malformed ranges_at")
    tasks = []
    for raw in doc["tasks"]:
        t = _parse(_dump(raw), Task, "tasks.json")
        if not TASK_ID_RE.fullmatch(t.id) or ".." in t.id:
            raise UsageError(f"tasks.json: malformed task id {t.id!r}")
        tasks.append(t)
    return {"ranges_at": ranges_at, "tasks": tasks}


def _apply_state(ctx: Ctx, machine: str, signals: list[Signal],
                 checkpoints: dict[str, Checkpoint], verdicts: list[tuple[str, bytes, Report]],
                 table: dict[str, Any] | None, applied: Applied) -> None:
    from hunkwise import inbox

    mir_path = _sync_dir(ctx) / "mirror.json"
    with store.transaction(ctx.lay) as state:
        mir = mirror(ctx)
        if table is not None:
            for t in table["tasks"]:
                owner = mir["tasks"].get(t.id)
                if t.id in state.tasks and owner is None:
                    continue  # this machine's own task: never replaced by a remote's copy
                if owner not in (None, machine):
                    continue  # mirrored from another coordinator first
                state.tasks[t.id] = t
                mir["tasks"][t.id] = machine
                applied.tasks.append(t.id)
            gone = [tid for tid, m in mir["tasks"].items() if m == machine
                    and tid not in {t.id for t in table["tasks"]}]
            for tid in gone:
                state.tasks.pop(tid, None)
                del mir["tasks"][tid]
            mir["ranges_at"][machine] = table["ranges_at"]
        known = {s.id for s in state.signals}
        for sig in signals:
            if sig.id not in known:
                state.signals.append(sig)
                applied.signals.append(sig.id)
        for key, cp in checkpoints.items():
            if key not in state.checkpoints:
                state.checkpoints[key] = cp
                applied.checkpoints.append(key)
        for name, data, report in verdicts:
            task = state.tasks.get(report.task_id)
            if task is None or task.id in mir["tasks"]:
                continue  # not this machine's to decide
            role = session_role(report.session or "")
            if role not in task.audit:
                _quarantine(ctx, machine, f"reports/{name}", data,
                            f"{task.id} asks no audit of role {role!r}", applied)
                continue
            if report.revision != max(task.revision, 1):
                _quarantine(ctx, machine, f"reports/{name}", data,
                            f"verdict on revision {report.revision}; {task.id} is at "
                            f"revision {task.revision}", applied)
                continue
            task.audit[role] = "approved" if report.verdict == "approve" else "changes"
            inbox.deliver(ctx.lay.inbox, data, task.id, report.revision)
            applied.verdicts.append(f"{task.id}: {role} {report.verdict} ({machine})")
        _save_json(mir_path, mir)


# ---- the commands --------------------------------------------------------------------------

def sync(ctx: Ctx, remote: str | None = None) -> dict[str, Any]:
    """`coord sync` / `worker sync`: fetch the others', apply, publish and push our own.

    A failed fetch or push is a warning: what was not pushed is pushed by the next sync,
    since the chain only grows.
    """
    name = remote_name(ctx, remote)
    if not name:
        raise UsageError("no remote to sync with: set [remote] name in coord.toml (committed) "
                         "or pass --remote NAME")
    warnings: list[str] = []
    why = fetch(ctx, name)
    if why:
        warnings.append(f"fetch from {name} failed: {why}; working from what was fetched before")
    applied = apply_remote(ctx)
    commit = publish(ctx)
    why = push(ctx, name)
    if why:
        warnings.append(f"push to {name} failed: {why}; it is pushed at the next sync")
    return {"machine": machine_name(), "remote": name, "published": commit,
            "pushed": commit is not None and not why, "fetched": sorted(remote_machines(ctx.repo)),
            "applied": applied.public(), "warnings": warnings}


def auto(ctx: Ctx) -> list[str]:
    """The sync a command runs by itself when `[remote] name` is set: warnings only."""
    try:
        if not ctx.config.remote.name:
            return []
        doc = sync(ctx)
    except CoordError as e:
        return [f"sync skipped: {e.message}"]
    return list(doc["warnings"]) + [f"quarantined {q['record']} from {q['machine']}: {q['reason']}"
                                    for q in doc["applied"]["quarantined"]]


def warn(lines: list[str]) -> None:
    import sys

    for line in lines:
        print(f"warning: {line}", file=sys.stderr)


def sync_text(d: dict[str, Any]) -> str:
    a = d["applied"]
    got = [f"{len(a[k])} {k}" for k in ("signals", "verdicts", "tasks", "checkpoints") if a[k]]
    lines = [f"{d['machine']}: published {str(d['published'] or 'nothing')[:12]}"
             f"{' and pushed' if d['pushed'] else ''} to {d['remote']}; "
             f"machines seen: {', '.join(d['fetched']) or 'none'}; "
             f"applied: {', '.join(got) or 'nothing new'}"]
    lines += [f"quarantined {q['record']} from {q['machine']}: {q['reason']}"
              for q in a["quarantined"]]
    return "\n".join(lines)


# ---- reading a task's report wherever it was delivered ---------------------------------------

def newest_report(ctx: Ctx, task_id: str) -> tuple[Report, str, str, str] | None:
    """(report, base tree, snapshot tree, machine) of the task's newest work report among
    this machine's inbox and every synced machine's records; None when there is none.
    Remote reports are read as strictly as the inbox's; a bad one is skipped."""
    from hunkwise import inbox

    found: list[tuple[int, int, Report, str, str, str]] = []
    for e in inbox.find_task_reports(ctx.lay.inbox, task_id):
        try:
            r = inbox.read_report(e.path)
        except UsageError:
            continue
        if r.kind == "task" and r.base_commit and _exists(ctx.repo, r.snapshot):
            found.append((r.revision, e.time_ns, r, f"{r.base_commit}^{{tree}}", r.snapshot,
                          machine_name()))
    for machine, commit in remote_machines(ctx.repo).items():
        for name, (_mode, oid) in _ls(ctx.repo, f"{commit}:reports").items():
            m = _REPORT_NAME_RE.fullmatch(name)
            if m is None or m["task"] != task_id:
                continue
            entry = _ls(ctx.repo, oid)
            if not {"report.json", "snapshot", "base"} <= set(entry):
                continue
            data = git.cat_blobs(ctx.repo, [entry["report.json"][1]])[entry["report.json"][1]]
            try:
                r = _read_report(ctx, name, data)
            except UsageError:
                continue
            if r.kind != "task" or r.task_id != task_id or machine_of(r.session) != machine:
                continue
            found.append((r.revision, int(m["t"]), r, entry["base"][1], entry["snapshot"][1],
                          machine))
    if not found:
        return None
    found.sort(key=lambda f: (f[0], f[1]))
    _rev, _t, report, base, snap, machine = found[-1]
    base = git.run(ctx.repo, "rev-parse", base).decode().strip()
    return report, base, snap, machine


def grants_at(repo: Path, task: Task, ranges_at: str | None, base: str) -> Task:
    """A copy of the task with its range grants mapped from `ranges_at` (where the state
    numbered them) to the tree `base`; unchanged when either is unknown here."""
    from . import diff
    from .ownership import map_range

    paths = sorted({g.path for g in task.grants if g.kind == "range"})
    if not paths or not ranges_at or not _exists(repo, ranges_at):
        return task
    old = git.run(repo, "rev-parse", f"{ranges_at}^{{tree}}").decode().strip()
    if old == base:
        return task
    by_path = {c.path: c for c in diff.diff_trees(repo, old, base, paths)}
    grants = []
    for g in task.grants:
        ch = by_path.get(g.path) if g.kind == "range" else None
        if ch is not None and ch.status != "D":
            s, e = map_range(g.start, g.end, ch.hunks)
            g = g.model_copy(update={"start": s, "end": e})
        grants.append(g)
    return task.model_copy(update={"grants": grants})
