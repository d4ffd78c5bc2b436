"""The after-call bracket: what a worker's shell call changed in the tree, and putting back
what it wrote outside its grants.

The guard judges a shell line before it runs; what it cannot know statically (a formatter
run on `.`, a script, `patch`) is checked afterwards. Before each shell call of a worker
session (PreToolUse) the tree's uncommitted state is recorded: `git status` (the index's
stat data: no file is read whose stat did not move) and the blob of every file that
differs from the index, kept reachable under refs/hunkwise/calls/ so that what the call
destroys can be brought back. After the call (PostToolUse) the same look again says which
files the call changed. A change outside the session's grants is put back at once from
the before-record, compare-and-swap (shared/git/worktree.py), and the agent is told which
file; unless another session's tool call overlapped in time (then it may be that call's
change: it is reported, never undone). Changes inside the grants, when no other call
overlapped, are recorded as the session's provenance (the lines it added).

Every hooked tool call opens a record in `calls/` of the state directory at PreToolUse and
closes it at PostToolUse (keyed by the payload's `tool_use_id`), so overlaps are seen: an
Edit names its file, a shell call counts as touching every file.

A write made outside any agent's hooks (an editor) during a worker's shell call looks like
the call's own; the bracket cannot tell them apart.
"""

from __future__ import annotations

import os
import time

from hunkwise.shared import fastjson

TYPE_CHECKING = False
if TYPE_CHECKING:  # call records are plain os.path strings: no pathlib on every hook call
    from collections.abc import Mapping, Sequence
    from typing import Any

    StrPath = str | os.PathLike[str]

CALLS = "calls"
CALL_REFS = "refs/hunkwise/calls"
KEEP_S = 600.0  # closed call records older than this are pruned
# A call whose after-hook never came (the agent was killed mid-call; an agent that sends
# no after-event for a failed call) stops counting as running after this long, and its
# records are pruned: one lost record must not suspend every other session's put-back.
OPEN_S = 3600.0
Key = list[int]  # (inode, size, mtime_ns, ctime_ns)
Entry = tuple[str, str]  # (mode, blob id)


def _key(full: str) -> Key | None:
    try:
        st = os.lstat(full)
    except OSError:
        return None
    # ctime too: a write that puts size and mtime back (utime) cannot set it
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


_PLAIN = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.@-")


def _digest(text: str) -> str:
    """A file-name-safe stand-in for an id: the id itself when plain, else a digest."""
    if 0 < len(text) <= 100 and all(c in _PLAIN for c in text) and not text.startswith("."):
        return text.replace("@", "_at_")
    import hashlib

    return "h" + hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:32]


# ---- the tree's uncommitted state ---------------------------------------------------------

class Dirty:
    """One path that differs from the index: `index` is its index entry (None: untracked),
    `present` whether the working tree holds it. (No dataclass: its import costs a hook
    call milliseconds.)"""

    __slots__ = ("index", "present")

    def __init__(self, index: Entry | None, present: bool) -> None:
        self.index = index
        self.present = present


def status(repo: StrPath) -> dict[str, Dirty]:
    """Every path whose working-tree file differs from the index, by git's own stat-data
    comparison (porcelain v2, untracked files listed one by one). Run without the door's
    imports (gitspawn): a worker's every shell call runs it twice."""
    from hunkwise.shared import gitspawn

    out = gitspawn.run(os.fspath(repo), "status", "--porcelain=v2", "-z", "--untracked-files=all",
                  "--no-renames", "--ignore-submodules=all")
    found: dict[str, Dirty] = {}
    for rec in out.split(b"\0"):
        if not rec:
            continue
        kind = rec[:1]
        if kind == b"?":
            found[os.fsdecode(rec[2:])] = Dirty(None, True)
        elif kind == b"1":
            parts = rec.split(b" ", 8)
            if len(parts) < 9:
                continue
            xy, m_index, m_tree, h_index = parts[1], parts[4], parts[5], parts[7]
            if xy[1:2] == b".":
                continue  # staged only: the working tree agrees with the index
            index = None if m_index == b"000000" else (m_index.decode(), h_index.decode())
            found[os.fsdecode(parts[8])] = Dirty(index, m_tree != b"000000")
    return found


def _hash(repo: StrPath, paths: Sequence[str]) -> dict[str, str | None]:
    if not paths:
        return {}
    from pathlib import Path

    from hunkwise.shared.git import worktree

    return worktree.current_oids(Path(repo), list(paths), write=True)


def _mode(full: str) -> str:
    try:
        st = os.lstat(full)
    except OSError:
        return "100644"
    if (st.st_mode & 0o170000) == 0o120000:
        return "120000"
    return "100755" if st.st_mode & 0o111 else "100644"


# ---- call records -------------------------------------------------------------------------

def _calls(root: str) -> str:
    return os.path.join(root, CALLS)


def call_id(data: Mapping[str, Any]) -> str | None:
    tid = data.get("tool_use_id")
    return _digest(tid) if isinstance(tid, str) and tid else None


def open_call(root: str, data: Mapping[str, Any], who: str, paths: list[str] | None,
              before: dict[str, Any] | None = None,
              settings: dict[str, str] | None = None) -> None:
    """Record that a tool call of `who` starts (paths: the files it writes; None: a shell
    call, which may write any file). `before` is a shell call's before-record, `settings`
    the agents' hook settings as they were (settings_before)."""
    cid = call_id(data)
    if cid is None:
        return
    d = _calls(root)
    os.makedirs(d, exist_ok=True)
    if before is not None:  # apart: others' overlap checks read only the small records
        _write(os.path.join(d, f".before-{cid}.{os.getpid()}.tmp"),
               os.path.join(d, f"before-{cid}.json"), before)
    if settings:
        _write(os.path.join(d, f".settings-{cid}.{os.getpid()}.tmp"),
               os.path.join(d, f"settings-{cid}.json"), settings)
    rec = {"who": who, "start": time.time(), "paths": paths}
    _write(os.path.join(d, f".open-{cid}.{os.getpid()}.tmp"), os.path.join(d, f"open-{cid}.json"),
           rec)


def keep_prior(root: str, data: Mapping[str, Any], path: str) -> None:
    """Keep what `path` holds before a call that replaces it whole (a Write), for its
    after-hook (`take_prior`); nothing when it does not exist yet."""
    cid = call_id(data)
    if cid is None:
        return
    d = _calls(root)
    try:
        with open(path, "rb") as f:
            data_ = f.read()
    except OSError:
        return
    os.makedirs(d, exist_ok=True)
    tmp = os.path.join(d, f".was-{cid}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data_)
    os.replace(tmp, os.path.join(d, f"was-{cid}"))


def take_prior(root: str, data: Mapping[str, Any]) -> bytes | None:
    """What `keep_prior` kept for this call, removed as it is read; None if nothing."""
    cid = call_id(data)
    if cid is None:
        return None
    path = os.path.join(_calls(root), f"was-{cid}")
    try:
        with open(path, "rb") as f:
            got = f.read()
    except OSError:
        return None
    try:
        os.unlink(path)
    except OSError:
        pass
    return got


def _write(tmp: str, dest: str, doc: Any) -> None:
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(fastjson.dumps(doc))
    os.replace(tmp, dest)


def _read(path: str) -> Any:
    with open(path, encoding="utf-8") as f:
        return fastjson.loads(f.read())


def _take(path: str) -> Any:
    """A record's side file, read and removed (None when it is missing or unreadable)."""
    try:
        got = _read(path)
        os.unlink(path)
    except (OSError, ValueError):
        return None
    return got


def close_call(root: str, data: Mapping[str, Any]) -> dict[str, Any] | None:
    """End a call's record (it stays, closed, for KEEP_S to show overlaps); its record."""
    cid = call_id(data)
    if cid is None:
        return None
    d = _calls(root)
    opened = os.path.join(d, f"open-{cid}.json")
    try:
        rec = _read(opened)
    except (OSError, ValueError):
        return None
    if not isinstance(rec, dict):
        return None
    now = time.time()
    rec["end"] = now
    _write(os.path.join(d, f".done-{cid}.{os.getpid()}.tmp"),
           os.path.join(d, f"done-{now:.6f}-{cid}.json"), rec)
    rec["before"] = _take(os.path.join(d, f"before-{cid}.json"))
    rec["settings"] = _take(os.path.join(d, f"settings-{cid}.json"))
    try:
        os.unlink(opened)
    except OSError:
        pass
    _prune(d, now)
    return rec


def _prune(d: str, now: float) -> None:
    try:
        names = os.listdir(d)
    except OSError:
        return
    for name in names:
        path = os.path.join(d, name)
        if name.startswith("done-"):
            try:
                end = float(name.split("-", 2)[1])
            except (IndexError, ValueError):
                continue
            stale = end < now - KEEP_S
        elif name.startswith(("open-", "before-", "was-")):
            try:
                stale = os.stat(path).st_mtime < now - OPEN_S
            except OSError:
                continue
        else:
            continue
        if stale:
            try:
                os.unlink(path)
            except OSError:
                pass


def overlapping(root: str, who: str, start: float, end: float) -> tuple[bool, set[str]]:
    """Other sessions' tool calls that ran at some time between `start` and `end`:
    (whether one was a shell call, which may have written anything; the files the others
    named)."""
    d = _calls(root)
    anything, paths = False, set[str]()
    try:
        names = os.listdir(d)
    except OSError:
        return False, set()
    for name in names:
        if not name.endswith(".json"):
            continue
        if name.startswith("done-"):
            try:
                if float(name.split("-", 2)[1]) < start:
                    continue
            except (IndexError, ValueError):
                continue
        elif not name.startswith("open-"):
            continue
        try:
            rec = _read(os.path.join(d, name))
        except (OSError, ValueError):
            continue  # a record being replaced: its other name is read
        if not isinstance(rec, dict) or rec.get("who") == who:
            continue
        if not isinstance(rec.get("start"), (int, float)) or rec["start"] > end:
            continue
        if name.startswith("open-") and rec["start"] < start - OPEN_S:
            continue  # its after-hook never came (OPEN_S)
        named = rec.get("paths")
        if isinstance(named, list):
            paths.update(p for p in named if isinstance(p, str))
        else:
            anything = True
    return anything, paths


# ---- before a shell call ------------------------------------------------------------------

def before(repo: StrPath, root: str, session: str) -> dict[str, Any]:
    """The tree's uncommitted state before a shell call: {path: [mode, oid, key] or None
    (deleted)} of every path that differs from the index. Blobs are stored and the record
    kept reachable under refs/hunkwise/calls/ (only when it differs from this session's
    last one: an unchanged tree costs one `git status`)."""
    dirty = status(repo)
    last_file = os.path.join(_calls(root), f"last-{_digest(session)}.json")
    try:
        last = _read(last_file)
    except (OSError, ValueError):
        last = {}
    if not isinstance(last, dict):
        last = {}
    rec: dict[str, Any] = {}
    todo = []
    for path, dy in dirty.items():
        if not dy.present:
            rec[path] = None
            continue
        key = _key(os.path.join(repo, path))
        prev = last.get(path)
        if isinstance(prev, list) and len(prev) == 3 and prev[2] == key:
            rec[path] = prev  # stat unchanged since the last record: same blob
        else:
            todo.append(path)
            rec[path] = [_mode(os.path.join(repo, path)), None, key]
    for path, oid in _hash(repo, todo).items():
        if oid is None:
            rec[path] = None
        else:
            rec[path][1] = oid
    if rec != last:
        _keep(repo, session, rec)
        os.makedirs(_calls(root), exist_ok=True)
        _write(f"{last_file}.{os.getpid()}.tmp", last_file, rec)
    return rec


def _keep(repo: StrPath, session: str, rec: Mapping[str, Any], ref: str | None = None) -> str:
    """A tree of the uncommitted files, written through a throwaway index, kept under
    refs/hunkwise/calls/<session digest> (or `ref`), the earlier ones in its reflog: the
    objects survive `git gc`."""
    import tempfile
    from pathlib import Path

    from hunkwise.shared import git

    entries = {p: (v[0], v[1]) for p, v in rec.items() if v is not None and v[1]}
    fd, index = tempfile.mkstemp(prefix="hunkwise-call-", suffix=".index")
    os.close(fd)
    os.unlink(index)
    try:
        env = {"GIT_INDEX_FILE": index, "HUNKWISE_COORDINATOR": "1"}
        top = Path(repo)
        git.run(top, "update-index", "-z", "--add", "--index-info",
                input=git.index_info(entries, top), env=env)
        tree = git.run(top, "write-tree", env=env).decode().strip()
        if ref is not None:  # (a record of its own: one ref each)
            git.run(top, "update-ref", ref, tree, env=env)
            return tree
        # The session's record, a commit with its reflog: each record stays reachable after
        # the session's next call moves the ref (`git log -g refs/hunkwise/calls/...` lists
        # them), until git's reflog expiry: what a write the hooks could not see destroyed,
        # a later call of the same session no longer takes beyond reach. (A commit, not the
        # tree: git's reflog walks and `git gc` expect commits there.)
        who = {f"GIT_{r}_{k}": v for r in ("AUTHOR", "COMMITTER")
               for k, v in (("NAME", "hunkwise"), ("EMAIL", "hunkwise@localhost"))}
        commit = git.run(top, "commit-tree", tree, "-m", "hunkwise: before a shell call",
                         env={**env, **who}).decode().strip()
        git.run(top, "update-ref", "--create-reflog", f"{CALL_REFS}/{_digest(session)}", commit,
                env={**env, **who})
    finally:
        try:
            os.unlink(index)
        except OSError:
            pass
    return tree


# ---- the agents' hook settings --------------------------------------------------------------

# The files that keep the guard on. Ignored by git (install-hooks excludes them), so the
# tree's record never holds them: a shell call that removes or rewrites one (code the guard
# cannot read, a `git clean -x` through another name) is seen here, and put back.
AGENT_SETTINGS = (".claude/settings.local.json", ".codex/hooks.json")
_OUR_HOOK = "hunkwise.coordinator.hook"


def settings_before(repo: StrPath) -> dict[str, str]:
    """{path: text} of the agents' hook settings that hold hunkwise's hooks now."""
    out: dict[str, str] = {}
    for rel in AGENT_SETTINGS:
        try:
            with open(os.path.join(repo, rel), encoding="utf-8") as f:
                text = f.read(1 << 20)
        except (OSError, UnicodeDecodeError):
            continue
        if _OUR_HOOK in text:
            out[rel] = text
    return out


def put_back_settings(repo: StrPath, kept: Any) -> list[str]:
    """Write back the hook settings a call removed or changed; the paths written."""
    if not isinstance(kept, dict):
        return []
    done = []
    for rel, text in sorted(kept.items()):
        if rel not in AGENT_SETTINGS or not isinstance(text, str):
            continue
        full = os.path.join(repo, rel)
        try:
            with open(full, encoding="utf-8") as f:
                if f.read(1 << 20) == text:
                    continue
        except (OSError, UnicodeDecodeError):
            pass
        if os.path.islink(full) or (os.path.exists(full) and not os.path.isfile(full)):
            continue  # not a file of ours any more: say so, but write nothing there
        os.makedirs(os.path.dirname(full), exist_ok=True)
        tmp = f"{full}.hunkwise-{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, full)
        done.append(rel)
    return done


# ---- after a shell call -------------------------------------------------------------------

class Change:
    __slots__ = ("path", "old", "now")

    def __init__(self, path: str, old: Entry | None, now: str | None) -> None:
        self.path = path
        self.old = old  # what the file held before the call (None: absent)
        self.now = now  # its blob id now (None: absent)


class Outcome:
    def __init__(self) -> None:
        self.put_back: list[str] = []
        self.reported: list[str] = []  # outside the grants, not undone
        self.failed: list[str] = []  # could not be put back
        self.changed: list[Change] = []
        self.kept = ""  # the tree holding what the call wrote into the files put back
        self.settings: list[str] = []  # agents' hook settings put back

    def message(self) -> str:
        out = []
        if self.settings:
            out.append("hunkwise: this command removed or changed the agents' hook settings, "
                       f"which keep the guard on; put back: {', '.join(self.settings)}")
        if self.put_back:
            out.append("hunkwise: this command wrote outside your grants; put back as they "
                       f"were before it: {', '.join(self.put_back[:10])}")
            if self.kept:
                out.append(f"hunkwise: what it wrote there is kept in tree {self.kept[:12]} "
                           f"(git show {self.kept[:12]}:PATH)")
        if self.reported:
            out.append("hunkwise: changed outside your grants while another session's tool "
                       f"call ran, so not undone: {', '.join(self.reported[:10])}; if this "
                       "command wrote them, tell the coordinator")
        if self.failed:
            out.append("hunkwise: changed outside your grants and changed again before it "
                       f"could be put back: {', '.join(self.failed[:10])}; tell the coordinator")
        if out:
            out.append("edit only the files your grants name; if the task needs another "
                       "file, report `worker blocked TASK_ID --reason \"needs <path>\"`")
        return "\n".join(out)


def changes(repo: StrPath, rec: Mapping[str, Any]) -> list[Change]:
    """What changed in the tree since the before-record `rec`."""
    now = status(repo)
    out: list[Change] = []
    rehash: list[str] = []
    clean_now: list[str] = []
    for path in sorted(set(rec) | set(now)):
        b = rec.get(path, ...)
        n = now.get(path)
        if b is ...:  # clean (or absent) before the call
            assert n is not None
            old = n.index
            if n.present:
                rehash.append(path)
                out.append(Change(path, old, None))
            elif old is not None:
                out.append(Change(path, old, None))  # deleted by the call
        elif n is None:  # differed before, agrees with the index now
            clean_now.append(path)
            out.append(Change(path, None if b is None else (b[0], b[1]), None))
        elif b is None:  # deleted before
            if n.present:
                rehash.append(path)
                out.append(Change(path, None, None))
        elif not n.present:
            out.append(Change(path, (b[0], b[1]), None))
        elif _key(os.path.join(repo, path)) != b[2]:
            rehash.append(path)
            out.append(Change(path, (b[0], b[1]), None))
    oids = _hash(repo, rehash)
    if clean_now:
        from hunkwise.shared import git

        listed = git.run(os.fspath(repo), "ls-files", "-s", "-z", "--", *clean_now,
                         env={"GIT_LITERAL_PATHSPECS": "1"})
        for line in listed.split(b"\0"):
            if line:
                meta, _, name = line.partition(b"\t")
                oids[os.fsdecode(name)] = meta.split(b" ")[1].decode()
    result = []
    for ch in out:
        ch.now = oids.get(ch.path)
        if ch.old is not None and ch.now == ch.old[1]:
            continue  # rewritten with the same content
        if ch.old is None and ch.now is None:
            continue
        result.append(ch)
    return result


def after(repo: StrPath, root: str, session: str, rec: Mapping[str, Any], start: float,
          end: float, covered: Any) -> Outcome:
    """Check a shell call of `session` that ran from `start` to `end`: put back what it
    wrote outside the grants (`covered(path)` says whether a grant covers a path) unless
    another session's call overlapped; record the lines it added inside them."""
    res = Outcome()
    res.changed = changes(repo, rec)
    if not res.changed:
        return res
    from pathlib import Path

    from hunkwise.shared.errors import CoordError
    from hunkwise.shared.git import worktree

    anything, named = overlapping(root, session, start, end)
    undo = [ch for ch in res.changed if not covered(ch.path)
            and not (anything or ch.path in named)]
    res.reported = [ch.path for ch in res.changed if not covered(ch.path) and ch not in undo]
    if undo:
        # What the call wrote is kept before it is put back: a write that was not the
        # call's (an editor's, during it) is never lost.
        wrote = {ch.path: [_mode(os.path.join(repo, ch.path)), ch.now, None]
                 for ch in undo if ch.now}
        if wrote:
            ref = f"{CALL_REFS}/undone/{_digest(session)}/{int(end * 1000)}"
            res.kept = _keep(repo, session, wrote, ref)
    for ch in undo:
        try:
            worktree.write_entries(Path(repo), {ch.path: ch.old}, expect={ch.path: ch.now})
        except CoordError:
            res.failed.append(ch.path)
        else:
            res.put_back.append(ch.path)
    if not anything:
        _note_added(repo, root, session, [c for c in res.changed
                                          if covered(c.path) and c.path not in named])
    return res


def _note_added(repo: StrPath, root: str, session: str, changed: list[Change]) -> None:
    """Provenance of a shell call: the lines each changed file holds now and did not
    before."""
    from pathlib import Path

    from hunkwise.shared import git
    from hunkwise.shared.state import provenance

    present = [c for c in changed if c.now is not None]
    if not present:
        return
    olds = git.cat_blobs(Path(repo), [c.old[1] for c in present if c.old is not None])
    for c in present:
        try:
            new = (Path(repo) / c.path).read_bytes()
        except OSError:
            continue
        was = set(olds.get(c.old[1], b"").split(b"\n")) if c.old is not None else set()
        added = [ln for ln in new.split(b"\n") if ln not in was]
        provenance.note(root, session, c.path, added)
