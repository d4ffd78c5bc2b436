"""`coord freeze`, `coord verify`, `coord thaw`: prove exactly the frozen set, once.

A freeze closes a batch: worker mutations and accepts are refused (each checks the freeze
under the same lock that guards its write), the frozen commit and a fingerprint of the
whole working tree and index are recorded, and `verify` runs the regression in a clean
checkout of that commit, never in the shared tree. At the end verify re-checks HEAD and
the fingerprint (compare-and-swap): anything that slipped in, even bypassing the tool,
fails it. A freeze left by a crashed CI stays until someone thaws it.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import re
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from xml.sax.saxutils import quoteattr

from hunkwise import inbox
from hunkwise.shared import git
from hunkwise.shared.errors import StateRefused, UsageError
from hunkwise.shared.hunks import diff, snapshot
from hunkwise.shared.state import config, store
from hunkwise.shared.state.context import Ctx, env_session, iso, machine_name
from hunkwise.shared.state.models import Freeze, SignalType, TaskState
from hunkwise.shared.state.signals import send
from hunkwise.shared.work import checks

if TYPE_CHECKING:
    from hunkwise.shared.state.documents import (
        ArchiveLine,
        CommandResult,
        DeferredEdit,
        FreezeResult,
        ThawResult,
        VerifyResult,
    )
    from hunkwise.shared.state.models import State

# Characters XML 1.0 forbids (terminal colours, for one, print ESC).
_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def fingerprint(ctx: Ctx) -> tuple[str, str, str]:
    """(digest, snapshot tree, index digest) of the working tree and the real index."""
    snap = snapshot.take(ctx.repo)
    index = hashlib.sha256(git.run(ctx.repo, "ls-files", "-s", "-z")).hexdigest()
    digest = hashlib.sha256(f"{snap.head}\n{snap.tree}\n{index}".encode()).hexdigest()
    return digest, snap.tree, index


def _who() -> str:
    s = env_session()
    if s:
        return s
    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001 - no passwd entry in some containers
        user = "unknown"
    return f"{user}@{machine_name()}"


def freeze(ctx: Ctx, *, defer_running: bool) -> FreezeResult:
    # The commit lock first: an accept between its HEAD move and its index update must
    # finish before the fingerprint is taken.
    with store.locked(ctx.lay, name="commit"), store.transaction(ctx.lay) as state:
        if state.freeze is not None:
            return {"freeze": state.freeze.public(), "already": True}
        running = sorted(t.id for t in state.tasks.values() if t.state == TaskState.IN_PROGRESS)
        if running and not defer_running:
            raise StateRefused("cannot freeze while tasks are in progress: " + ", ".join(running)
                               + " (wait for their reports, or use --defer-running)")
        from hunkwise.coordinator.sessions import coordinator_session

        for tid in running:
            t = state.tasks[tid]
            if t.claim is not None:
                # Tell the worker: an edit it keeps making would otherwise only show up
                # at the end of a long verify.
                send(state, sender=coordinator_session(), to=t.claim.session,
                     kind=SignalType.BLOCKED_ON,
                     about=tid, payload=f"deferred to batch {state.batch + 1} by the release "
                     f"freeze of batch {state.batch}: stop editing; worker start {tid} "
                     "after coord thaw")
            t.state = TaskState.DEFERRED
            t.batch = state.batch + 1
            t.claim = None
            t.updated_at = store.now()
        digest, tree, index = fingerprint(ctx)
        state.freeze = Freeze(commit=git.head(ctx.repo), batch=state.batch, deferred=running,
                              by=_who(), at=store.now(), fingerprint=digest, tree=tree, index=index)
        fz = state.freeze
    return {"freeze": fz.public(), "already": False}


SESSION_KEEP_S = 7 * 24 * 3600


def _archive_closed(ctx: Ctx, state: State, closed: int) -> int:
    """Move what the closed batch finished out of the state: finished tasks, delivered
    signals, answered decisions, sessions idle for a week. The state every command parses
    then stays the size of the work in flight; `--all` views read the archive too."""
    now = store.now()
    done = [t for t in state.tasks.values() if not t.active and t.batch <= closed]
    signals = [s for s in state.signals if s.state == "delivered"]
    decisions = [d for d in state.decisions if d.state == "answered"]
    holding = {t.claim.session for t in state.tasks.values() if t.claim}
    sessions = {s: at for s, at in state.sessions.items()
                if now - at > SESSION_KEEP_S and s not in holding}
    records: list[ArchiveLine] = [{"kind": "task", "data": t.model_dump(mode="json")} for t in done]
    records += [{"kind": "signal", "data": s.model_dump(mode="json", by_alias=True)} for s in signals]
    records += [{"kind": "decision", "data": d.model_dump(mode="json")} for d in decisions]
    records += [{"kind": "session", "data": {"session": s, "seen": at}} for s, at in sessions.items()]
    store.archive(ctx.lay, records)
    inbox.retire(ctx.lay.inbox, {t.id for t in done})
    for t in done:
        del state.tasks[t.id]
        for key in [k for k in state.checkpoints if k.endswith(f"|{t.id}")]:
            del state.checkpoints[key]
    state.signals = [s for s in state.signals if s.state != "delivered"]
    state.decisions = [d for d in state.decisions if d.state != "answered"]
    for s in sessions:
        del state.sessions[s]
    return len(records)


def thaw(ctx: Ctx) -> ThawResult:
    with store.transaction(ctx.lay) as state:
        fz = state.freeze
        if fz is None:
            return {"thawed": False, "batch": state.batch, "reopened": []}
        archived = _archive_closed(ctx, state, fz.batch)
        state.freeze = None
        state.batch = fz.batch + 1
        reopened = []
        for t in state.tasks.values():
            if t.state == TaskState.DEFERRED:
                t.state = TaskState.ASSIGNED
                t.batch = state.batch
                reopened.append(t.id)
            if t.held_until_thaw:
                t.held_until_thaw = False
                t.batch = state.batch
                reopened.append(t.id)
    return {"thawed": True, "batch": state.batch, "reopened": sorted(set(reopened)),
            "was": fz.public(), "archived": archived}


def _changed_paths(ctx: Ctx, old_tree: str, new_tree: str) -> list[str]:
    return diff.changed_paths(ctx.repo, old_tree, new_tree)


def verify(ctx: Ctx, *, junit: str | None = None, dry: bool = False,
           bisect: bool | None = None) -> VerifyResult:
    if dry:
        return _dry(ctx, junit)
    state = store.load(ctx.lay)
    fz = state.freeze
    if fz is None:
        raise StateRefused("not frozen: nothing ran; run coord freeze first")
    # The proof runs the commands the frozen commit itself carries, not an uncommitted
    # edit of coord.toml that some task left in the shared tree.
    settings = config.load_at(ctx.repo, fz.commit) if fz.commit else ctx.config
    cfg = settings.verify
    problems: list[str] = []
    results: list[CommandResult] = []
    extra: dict[str, Any] = {}
    if not cfg.commands:
        problems.append("coord.toml has no [verify] commands: nothing proves the frozen set")
    head = git.head(ctx.repo)
    if head != fz.commit:
        problems.append(f"HEAD moved since the freeze: {fz.commit} -> {head}")
    if fz.commit and not problems:
        previous = signal.signal(signal.SIGTERM, _terminated)
        try:
            _run_all(ctx, fz.commit, settings, results, problems, extra)
            failing = [c["command"] for c in results if not c["passed"]]
            if failing and (cfg.bisect if bisect is None else bisect):
                from hunkwise.coordinator.bisect import bisect_batch

                found = bisect_batch(ctx, state, fz, failing, settings)
                extra["bisect"] = found
                extra["culprit"] = found["culprit"]
        finally:
            signal.signal(signal.SIGTERM, previous)
    elif fz.commit is None:
        problems.append("the frozen state has no commit")
    deferred_edits = _final_check(ctx, fz, head, problems)
    ok = not problems
    batch_tasks = sorted(t.id for t in state.tasks.values()
                         if t.state == TaskState.ACCEPTED and t.batch == fz.batch)
    doc: VerifyResult = {"ok": ok, "commit": fz.commit, "problems": problems,
                         "commands": results, "batch": fz.batch, "at": iso(time.time()),
                         "tasks": batch_tasks, "deferred_edits": deferred_edits, **extra}  # type: ignore[typeddict-item]
    _save_record(ctx, doc)
    if junit:
        _write_junit(Path(junit), doc)
    return doc


def _dry(ctx: Ctx, junit: str | None) -> VerifyResult:
    """The commands on HEAD, in a scratch checkout, without a freeze: refusing nothing
    (a freeze, a dirty tree, running tasks) and recording nothing."""
    head = git.head(ctx.repo)
    settings = ctx.config
    problems: list[str] = []
    results: list[CommandResult] = []
    extra: dict[str, Any] = {}
    if not settings.verify.commands:
        problems.append("coord.toml has no [verify] commands: nothing was run")
    if head is None:
        problems.append("the repository has no commit yet")
    if head is not None and not problems:
        previous = signal.signal(signal.SIGTERM, _terminated)
        try:
            _run_all(ctx, head, settings, results, problems, extra)
        finally:
            signal.signal(signal.SIGTERM, previous)
    batch = store.load(ctx.lay).batch if ctx.lay.state_file.exists() else 1
    doc: VerifyResult = {"ok": not problems, "commit": head, "problems": problems,
                         "commands": results, "batch": batch, "at": iso(time.time()),
                         "tasks": [], "deferred_edits": [], "dry": True, **extra}  # type: ignore[typeddict-item]
    if junit:
        _write_junit(Path(junit), doc)
    return doc


def _terminated(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # unwinds through the cleanup of the checkout and the command


def _run_all(ctx: Ctx, commit: str, settings: config.Config, results: list[CommandResult],
             problems: list[str], extra: dict[str, Any]) -> None:
    cfg = settings.verify
    try:
        with checks.checkout(ctx.repo, ctx.lay.root, commit, settings.checkout) as where:
            results += checks.run_commands(where, cfg.commands, cfg.timeout_seconds)
    except checks.SetupFailed as e:
        problems.append(f"setup: {e.message}")
        r = e.result
        extra["setup"] = {"command": r.command, "exit_code": r.exit_code, "passed": False,
                          "duration_s": r.duration_s, "output_tail": r.output_tail}
        return
    for c in results:
        if not c["passed"]:
            why = "timed out" if c["exit_code"] == 124 else f"exit {c['exit_code']}"
            problems.append(f"{c['command']!r} failed ({why})")


def _final_check(ctx: Ctx, fz: Freeze, head: str | None,
                 problems: list[str]) -> list[DeferredEdit]:
    """Compare-and-swap at the end: the proof holds only for what is still frozen.

    A deferred task editing its own grant during the freeze does not touch the frozen
    commit, so it does not fail the proof; it is reported apart. Anything else that moved
    HEAD, the index or other paths does fail it.
    """
    deferred_edits: list[DeferredEdit] = []
    with store.locked(ctx.lay):
        now_state = store.load(ctx.lay)
        if now_state.freeze is None or now_state.freeze.fingerprint != fz.fingerprint:
            problems.append("the freeze was lifted or replaced while verify ran")
        head2 = git.head(ctx.repo)
        if head2 != fz.commit and head == fz.commit:
            problems.append(f"HEAD moved during verify: {fz.commit} -> {head2}")
        digest, tree, index = fingerprint(ctx)
        if digest != fz.fingerprint:
            changed = _changed_paths(ctx, fz.tree, tree) if tree != fz.tree else []
            if changed and head2 == fz.commit:
                changed, deferred_edits = _split_deferred(ctx, now_state, fz, tree, changed)
            if changed:
                problems.append("the working tree changed since the freeze: " + ", ".join(changed[:20])
                                + (f" (+{len(changed) - 20} more)" if len(changed) > 20 else ""))
            if index != fz.index:
                problems.append("the index changed since the freeze (something was staged)")
            if not changed and not deferred_edits and index == fz.index and head2 == fz.commit:
                problems.append("the working tree changed since the freeze")
    return deferred_edits


def _split_deferred(ctx: Ctx, state: State, fz: Freeze, tree: str,
                    changed: list[str]) -> tuple[list[str], list[DeferredEdit]]:
    """Which changed paths changed only by deferred tasks' edits inside their own grants."""
    from collections import Counter

    from hunkwise.shared.hunks.ownership import attribute

    deferred = [state.tasks[t] for t in fz.deferred if t in state.tasks
                and state.tasks[t].active]
    if not deferred:
        return changed, []
    base = git.head_tree(ctx.repo)
    before = {c.path: c for c in diff.diff_trees(ctx.repo, base, fz.tree, changed)}
    now = diff.diff_trees(ctx.repo, base, tree, changed)
    olds = git.cat_blobs(ctx.repo, [c.old_oid for c in now if c.splittable and c.hunks])
    att = attribute(now, deferred, {c.path: olds[c.old_oid] for c in now
                                    if c.splittable and c.hunks})
    owner_of = {id(h): tid for tid, chs in att.owned.items() for ch in chs for h in ch.hunks}
    whole_owner = {ch.path: tid for tid, chs in att.owned.items() for ch in chs}
    others: list[str] = []
    edits: dict[str, set[str]] = {}
    for ch in now:
        was = before.get(ch.path)
        seen = Counter(h.sha256 for h in was.hunks) if was else Counter()
        who: set[str] = set()
        ok = True
        for h in ch.hunks if ch.splittable and ch.hunks else [None]:
            if h is not None and seen[h.sha256] > 0:
                seen[h.sha256] -= 1  # already there at the freeze
                continue
            tid = owner_of.get(id(h)) if h is not None else whole_owner.get(ch.path)
            if tid is None:
                ok = False
            else:
                who.add(tid)
        if ok and who:
            for tid in who:
                edits.setdefault(tid, set()).add(ch.path)
        else:
            others.append(ch.path)
    others += [p for p in changed if p not in {c.path for c in now} and p not in before]
    return sorted(set(others)), [{"task": t, "paths": sorted(ps)} for t, ps in sorted(edits.items())]


def _save_record(ctx: Ctx, doc: VerifyResult) -> None:
    d = ctx.lay.root / "verifications"
    d.mkdir(parents=True, exist_ok=True)
    name = f"{doc['commit'] or 'none'}-{int(time.time() * 1000)}.json"
    store.atomic_write(d / name, json.dumps(doc, indent=1).encode())
    doc["record"] = str(d / name)


def _write_junit(path: Path, doc: VerifyResult) -> None:
    cases = []
    for c in doc["commands"]:
        body = ""
        if not c["passed"]:
            text = _XML_BAD.sub("?", c["output_tail"]).replace("]]>", "]]]]><![CDATA[>")
            exit_text = quoteattr(f"exit {c['exit_code']}")
            body = (f"<failure message={exit_text}>"
                    f"<![CDATA[{text}]]></failure>")
        cases.append(f'  <testcase classname="coord.verify" name={quoteattr(_XML_BAD.sub("?", c["command"]))} '
                     f'time="{c["duration_s"]}">{body}</testcase>')
    for p in doc["problems"]:
        if not any(p.startswith(repr(c["command"])) for c in doc["commands"]):
            cases.append(f'  <testcase classname="coord.verify" name="frozen set">'
                         f"<failure message={quoteattr(_XML_BAD.sub('?', p))}/></testcase>")
    failures = sum(1 for c in cases if "<failure" in c)
    xml = (f'<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name="coord verify" '
           f'tests="{len(cases)}" failures="{failures}">\n' + "\n".join(cases) + "\n</testsuite>\n")
    try:
        store.atomic_write(path.resolve(), xml.encode())
    except OSError as e:
        raise UsageError(f"--junit {path}: {e.strerror}") from None
