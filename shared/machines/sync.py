"""Machines that coordinate through a git remote they already share: no server of ours.

Each machine publishes only its own records, as one commit chain under
`refs/hunkwise/m/<machine>/records`; every sync adds a commit whose parent is the last
one, so a push is always a fast-forward of a ref no other machine writes (never forced,
never in conflict). Its tree:

    signals/<sig-id>@<machine>        a signal one of its sessions (or its coordinator) sent
    checkpoints/<key>                 a checkpoint or handoff of one of its sessions, with
    edits/<key>/{snapshot,base}       the trees of the task's changes it carries
    claims/<task>                     a claim its session holds on another machine's task
    reports/<inbox name>/report.json  a report one of its sessions delivered, with
    reports/<inbox name>/snapshot     the report's snapshot tree and
    reports/<inbox name>/base         its base commit's tree (so both travel with the push)
    tasks.json                        the coordinator's machine only: its tasks and claims

A chain past COMPACT_AFTER commits starts again from a root commit as the next generation
of the ref (`records-<n>`); the old generation is deleted in the same atomic push.

A fetch copies every machine's chain to `refs/hunkwise/remote/<machine>/records`. Nothing
read from there is trusted: each record is parsed as strictly as a report in the inbox
(size caps, duplicate keys, NaN, the strict record), its id or session must name the
machine whose ref holds it, and what fails is quarantined with its reason. The machine
that holds a task in its own state is the one authority for it: it applies remote
requests (a claim, a work report, an audit verdict) at its next sync under its lock;
other machines keep a mirror of its published tasks, replaced at every sync.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hunkwise.shared import git
from hunkwise.shared.errors import CoordError, GitError, UsageError
from hunkwise.shared.git import objects
from hunkwise.shared.machines.chains import (
    KEEP_FINISHED_S,
    KEEP_REPORTS_S,
    KEY_RE,
    OWN,
    SEEN,
    Nested,
    chain_refs,
    dump_json,
    gen_number,
    gen_ref,
    generations,
    has_object,
    ls_tree,
    machine_of,
    mirror,
    own_ref,
    plan_tree,
    read_ref,
)
from hunkwise.shared.state import store
from hunkwise.shared.state.context import Ctx, machine_name
from hunkwise.shared.state.models import ClaimEntry, Report, State, Task, TaskState

if TYPE_CHECKING:
    from pathlib import Path

    from hunkwise.shared.state.documents import SyncResult

# A chain longer than this is compacted: its machine publishes a new root commit holding
# the current tree under the next generation of its ref, and deletes the old one.
COMPACT_AFTER = 1000


def _is_authority(ctx: Ctx, state: State) -> list[Task]:
    """The tasks this machine holds as the authority (not as a mirror)."""
    mirrored = mirror(ctx)["tasks"]
    return [t for t in state.tasks.values() if t.id not in mirrored]


def _report_records(ctx: Ctx, me: str, current: dict[str, tuple[str, str]]
                    ) -> tuple[dict[str, tuple[str, str]], list[tuple[str, bytes, Report]],
                               list[Any]]:
    """Reports delivered by this machine's sessions: kept ({name: entry}) and new ones."""
    from hunkwise import inbox

    keep: dict[str, tuple[str, str]] = {}
    fresh: list[tuple[str, bytes, Report]] = []
    theirs: list[Any] = []  # delivered here for another machine's task: it reads them
    mirrored = mirror(ctx)["tasks"]
    cutoff = (store.now() - KEEP_REPORTS_S) * 1e9
    for folder in ("new", "cur"):
        entries, _odd = inbox.entries(ctx.lay.inbox, folder)
        for e in entries:
            if e.time_ns < cutoff:
                continue
            if e.name in current:
                keep[e.name] = current[e.name]
                if folder == "new" and e.task_id in mirrored:
                    theirs.append(e)
                continue
            try:
                report = inbox.read_report(e.path)
            except UsageError:
                continue  # the coordinator quarantines it when it reads it
            if machine_of(report.session) != me:
                continue  # delivered here on another machine's behalf, or imported
            fresh.append((e.name, e.path.read_bytes(), report))
            if folder == "new" and e.task_id in mirrored:
                theirs.append(e)
    return keep, fresh, theirs


def publish(ctx: Ctx, refs: dict[str, str] | None = None) -> str | None:
    """Write this machine's records as a new commit of its chain; return the commit (or
    the unchanged one, or None when there is nothing to publish). `refs`: this machine's
    chain refs ({ref: commit}, chain_refs) when the caller listed them; kept up to date
    with what this writes, for the push that follows."""
    repo, me = ctx.repo, machine_name()
    for attempt in range(5):
        if refs is None:
            refs = chain_refs(repo, me)
        elif attempt:  # a compare-and-swap failed: list them again
            listed = chain_refs(repo, me)
            refs.clear()
            refs.update(listed)
        ref = own_ref(me, repo, refs)
        state = store.load(ctx.lay)
        old = read_ref(repo, ref)
        # A fresh clone continues its own chain.
        parent = old or read_ref(repo, ref.replace(OWN, SEEN, 1))
        top = ls_tree(repo, parent) if parent else {}
        current_reports = ls_tree(repo, f"{parent}:reports") if parent and "reports" in top else {}

        blobs, edits = _record_blobs(ctx, state, me)
        keep, fresh, theirs = _report_records(ctx, me, current_reports)
        names = list(blobs)
        contents = [blobs[n] for n in names] + [data for _n, data, _r in fresh]
        # Every id is computed here first: a sync that changes nothing writes nothing.
        oids = [objects.blob_id(repo, data) for data in contents]
        by_name = {n: str(o) for n, o in zip(names, oids[:len(names)], strict=True)}
        reports = _reports_tree(repo, keep, fresh, oids[len(names):])
        root = _root_tree(by_name, edits, reports)
        if not root and parent is None:
            return None
        tree, levels = plan_tree(repo, root)
        if parent and git.tree_of(repo, parent) == tree:
            if old is None:
                git.run(repo, "update-ref", ref, parent, git.null_oid(repo))
                refs[ref] = parent
            _published(theirs)
            return parent
        if objects.hash_blobs(repo, contents) != oids:
            raise CoordError("git stored the records under other ids than computed; "
                             "is the repository's object format supported?")
        objects.make_trees(repo, levels)  # every level in one process
        commit, target = _commit(repo, me, ref, tree, parent)
        # Compare-and-swap: another command of this machine may have published meanwhile.
        if target != ref:
            rc, _ = git.run_rc(repo, "update-ref", target, commit, git.null_oid(repo))
            if rc == 0 and old is not None and git.run_rc(repo, "update-ref", "-d", ref, old)[0] == 0:
                refs.pop(ref, None)
        else:
            rc, _ = git.run_rc(repo, "update-ref", ref, commit, old or git.null_oid(repo))
        if rc == 0:
            refs[target] = commit
            _published(theirs)
            return commit
    raise CoordError(f"{ref} kept moving while publishing; try again")


def _record_blobs(ctx: Ctx, state: State, me: str) -> tuple[dict[str, bytes], Nested]:
    """This machine's entries as files of its chain (signals, checkpoints, claims on
    mirrored tasks, the task table of the tasks it coordinates), and the edits that travel
    with its checkpoints."""
    repo = ctx.repo
    blobs: dict[str, bytes] = {}
    for sig in state.signals:
        if "@" in sig.id or machine_of(sig.sender) != me:
            continue  # imported, or sent by nobody of this machine
        pub = sig.model_copy(update={"id": f"{sig.id}@{me}", "state": "pending", "acked_by": []})
        blobs[f"signals/{pub.id}"] = dump_json(pub.model_dump(mode="json", by_alias=True))
    edits: Nested = {}
    for key, cp in state.checkpoints.items():
        if machine_of(cp.session) == me and KEY_RE.fullmatch(key):
            blobs[f"checkpoints/{key}"] = dump_json(cp.model_dump(mode="json"))
            own = cp.saved.own if cp.saved is not None else None
            if cp.saved is not None and cp.saved.base and has_object(repo, cp.saved.tree) \
                    and has_object(repo, cp.saved.base) and (own is None or has_object(repo, own)):
                # The edits travel with it: the snapshot, base and own trees as entries.
                trees: Nested = {"snapshot": ("040000", cp.saved.tree),
                                 "base": ("040000", cp.saved.base)}
                if own is not None:
                    trees["own"] = ("040000", own)
                edits[key] = trees
    mirrored = mirror(ctx)["tasks"]
    for t in state.tasks.values():
        c = t.claim
        if t.id in mirrored and c is not None and machine_of(c.session) == me \
                and t.state in (TaskState.IN_PROGRESS, TaskState.REPORTED):
            rec = ClaimEntry(task=t.id, session=c.session, state="in_progress" if t.state is TaskState.IN_PROGRESS else "reported",
                              revision=t.revision, opened=c.opened, heartbeat=c.heartbeat,
                              ttl=c.ttl)
            blobs[f"claims/{t.id}"] = dump_json(rec.model_dump(mode="json"))
    own_tasks = _is_authority(ctx, state)
    if own_tasks:
        now = store.now()
        shown = [t for t in own_tasks if t.active or now - t.updated_at < KEEP_FINISHED_S]
        blobs["tasks.json"] = dump_json({"machine": me, "ranges_at": state.ranges_at,
                                     "tasks": [t.model_dump(mode="json") for t in shown]})
    return blobs, edits


def _reports_tree(repo: Path, keep: dict[str, tuple[str, str]],
                  fresh: list[tuple[str, bytes, Report]], oids: list[git.Sha]) -> Nested:
    """The `reports/` folder: the reports kept, and each new one with its snapshot and base
    trees where this repository has them."""
    reports: Nested = dict(keep)
    for (name, _data, report), oid in zip(fresh, oids, strict=True):
        entry: Nested = {"report.json": ("100644", str(oid))}
        if has_object(repo, report.snapshot):
            entry["snapshot"] = ("040000", report.snapshot)
        base_tree = git.tree_of(repo, report.base_commit) if report.base_commit else None
        if base_tree is not None:
            entry["base"] = ("040000", base_tree)
        reports[name] = entry
    return reports


def _root_tree(by_name: dict[str, str], edits: Nested, reports: Nested) -> Nested:
    """The chain commit's tree, as nested folders of (mode, object id) entries."""
    root: Nested = {}
    for folder in ("signals", "checkpoints", "claims"):
        sub: Nested = {n.split("/", 1)[1]: ("100644", o) for n, o in by_name.items()
                       if n.startswith(folder + "/")}
        if sub:
            root[folder] = sub
    if edits:
        root["edits"] = edits
    if reports:
        root["reports"] = reports
    if "tasks.json" in by_name:
        root["tasks.json"] = ("100644", by_name["tasks.json"])
    return root


def _commit(repo: Path, me: str, ref: str, tree: str, parent: str | None) -> tuple[str, str]:
    """A commit of `tree` on `parent` and the ref it is for: past COMPACT_AFTER commits, a
    new root on the next generation's ref instead."""
    env = {"GIT_AUTHOR_NAME": "hunkwise", "GIT_AUTHOR_EMAIL": f"hunkwise@{me}",
           "GIT_COMMITTER_NAME": "hunkwise", "GIT_COMMITTER_EMAIL": f"hunkwise@{me}"}
    args = ["commit-tree", tree, "-m", f"hunkwise records of {me}"]
    target = ref
    if parent and int(git.run(repo, "rev-list", "--count", parent).decode()) >= COMPACT_AFTER:
        # Compaction: a new root holding the current tree, as the next generation.
        gen = gen_number(ref)
        target, parent = gen_ref(OWN, me, gen + 1), None
        args[-1] += f" (compacted, generation {gen + 1})"
    if parent:
        args[2:2] = ["-p", parent]
    commit = git.run(repo, *args, env=env).decode().strip()
    return commit, target


def _published(entries: list[Any]) -> None:
    """Reports delivered here for a task another machine coordinates are that machine's to
    read: once in this machine's records, they leave this inbox's queue (kept in cur/)."""
    from hunkwise import inbox

    for e in entries:
        inbox.archive(e)


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


def push(ctx: Ctx, remote: str, refs: dict[str, str] | None = None) -> str | None:
    """Push this machine's chain (`refs`: its chain refs as publish left them, when known)."""
    me = machine_name()
    refs = chain_refs(ctx.repo, me) if refs is None else refs
    ref = own_ref(me, ctx.repo, refs)
    if read_ref(ctx.repo, ref) is None:
        return None
    # Never forced: only this machine writes its refs, each commit has the last as parent,
    # and a compacted chain is a new ref (the next generation), not a rewrite of the old.
    # The old generations the remote still holds are deleted in the same atomic push,
    # once the new one holds every live record.
    older = [gen_ref(OWN, me, g) for g in generations(ctx.repo, SEEN, me, refs) if g < gen_number(ref)]
    if not older and refs.get(ref.replace(OWN, SEEN, 1)) == refs.get(ref):
        return None  # the remote held this commit at the fetch: nothing to send
    return _git_net(ctx, "push", "--quiet", "--no-verify", *(["--atomic"] if older else []),
                    remote, f"{ref}:{ref}", *[f":{o}" for o in older])


def fetch(ctx: Ctx, remote: str) -> str | None:
    # --prune: a generation its machine deleted after compacting goes here too.
    return _git_net(ctx, "fetch", "--quiet", "--prune", "--no-tags", "--no-write-fetch-head",
                    remote, f"+{OWN}/*:{SEEN}/*")


# ---- the commands --------------------------------------------------------------------------

def sync(ctx: Ctx, remote: str | None = None, *, fetching: bool = True) -> SyncResult:
    """`coord sync` / `worker sync`: fetch the others', apply, publish and push our own
    (without `fetching`, only what this machine has to send goes: a command that synced
    when it began and changed something since).

    A failed fetch or push is a warning: what was not pushed is pushed by the next sync,
    since the chain only grows.
    """
    name = remote_name(ctx, remote)
    if not name:
        raise UsageError("no remote to sync with: set [remote] name in coord.toml (committed) "
                         "or pass --remote NAME")
    warnings: list[str] = []
    why = fetch(ctx, name) if fetching else None
    if why:
        warnings.append(f"fetch from {name} failed: {why}; working from what was fetched before")
    from hunkwise.shared.machines.remote import apply_remote, remote_machines

    # One listing of the refs serves the whole sync: the fetched chains, and this
    # machine's own (which only this sync's publish moves, and tells).
    listed = git.list_refs(ctx.repo, f"{SEEN}/", f"{OWN}/{machine_name()}/")
    machines = remote_machines(ctx.repo, {r: o for r, o in listed.items()
                                          if r.startswith(f"{SEEN}/")})
    chain = {r: o for r, o in listed.items() if r.startswith(
        (f"{OWN}/{machine_name()}/", f"{SEEN}/{machine_name()}/"))}
    applied = apply_remote(ctx, machines)
    commit = publish(ctx, chain)
    why = push(ctx, name, chain)
    if why:
        warnings.append(f"push to {name} failed: {why}; it is pushed at the next sync")
    return {"machine": machine_name(), "remote": name, "published": commit,
            "pushed": commit is not None and not why, "fetched": sorted(machines),
            "applied": applied.public(), "warnings": warnings}


def auto(ctx: Ctx, *, fetching: bool = True) -> list[str]:
    """The sync a command runs by itself when `[remote] name` is set: warnings only."""
    try:
        if not ctx.config.remote.name:
            return []
        doc = sync(ctx, fetching=fetching)
    except CoordError as e:
        return [f"sync skipped: {e.message}"]
    return list(doc["warnings"]) + [f"quarantined {q['record']} from {q['machine']}: {q['reason']}"
                                    for q in doc["applied"]["quarantined"]]


def warn(lines: list[str]) -> None:
    import sys

    for line in lines:
        print(f"warning: {line}", file=sys.stderr)


def sync_text(d: SyncResult) -> str:
    a = d["applied"]
    got = [f"{len(a[k])} {k}" for k in ("signals", "verdicts", "tasks", "checkpoints",
                                          "claims", "works") if a.get(k)]
    lines = [(f"{d['machine']}: published {str(d['published'] or 'nothing')[:12]}"
              f"{' and pushed' if d['pushed'] else ''} to {d['remote']}; "
              f"machines seen: {', '.join(d['fetched']) or 'none'}; "
              f"applied: {', '.join(got) or 'nothing new'}")]
    lines += [f"quarantined {q['record']} from {q['machine']}: {q['reason']}"
              for q in a["quarantined"]]
    return "\n".join(lines)
