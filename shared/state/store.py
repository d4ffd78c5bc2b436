"""The state directory, atomic writes, and the lock that guards every read-modify-write.

State lives in `coord/` inside the git common directory (or `$COORD_DIR`), so it never
appears in the working tree or in `git status`, and every worktree of the repo shares it.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import tempfile
import time
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from hunkwise.shared import git
from hunkwise.shared.errors import StateRefused, UsageError
from hunkwise.shared.state.models import STATE_VERSION, State, check_task
from hunkwise.shared.state.schema import WARM, Record, RecordError

if TYPE_CHECKING:
    from hunkwise.shared.state.documents import ArchiveLine

T = TypeVar("T")


def parse_untrusted(data: bytes, read: Callable[[Any], T], what: str, limit: int,
                    kind: str = "") -> T:
    """Bytes from a process hunkwise does not trust (a worker's report, another machine's
    record) read strictly (`read`: a record's model_validate, or validate_report): a size cap,
    strict JSON, the schema; one line on failure."""
    if len(data) > limit:
        raise UsageError(f"{what}: over the {limit} byte limit")
    try:
        doc = strict_json_loads(data)
    except (ValueError, RecursionError) as e:
        raise UsageError(f"{what}: not valid JSON ({str(e)[:200]})") from None
    try:
        return read(doc)
    except ValueError as e:
        lines = str(e).splitlines()
        detail = "; ".join(lines[1:3]) if len(lines) > 2 else str(e)
        schema = f"the {kind} schema" if kind else "the schema"
        raise UsageError(f"{what}: does not match {schema} ({detail[:300]})") from None


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Temp file in the same directory, fsync, replace, fsync the directory."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def strict_json_loads(data: bytes | str) -> Any:
    """json.loads that refuses duplicate keys and NaN/Infinity."""

    def no_dupes(pairs: list[tuple[str, Any]]) -> dict[str, Any]:  # any JSON object
        out = dict(pairs)  # built in C; a key given twice makes it shorter than the pairs
        if len(out) != len(pairs):
            seen: set[str] = set()
            for k, _v in pairs:
                if k in seen:
                    raise ValueError(f"duplicate key {k!r}")
                seen.add(k)
        return out

    def no_constants(name: str) -> Any:
        raise ValueError(f"{name} is not valid JSON")

    return json.loads(data, object_pairs_hook=no_dupes, parse_constant=no_constants)


@dataclass(frozen=True)
class Layout:
    repo: Path
    root: Path

    @property
    def state_file(self) -> Path:
        return self.root / "state.json"

    @property
    def lock_file(self) -> Path:
        return self.root / "lock"

    @property
    def inbox(self) -> Path:
        return self.root / "inbox"


def layout(repo: Path) -> Layout:
    env = os.environ.get("COORD_DIR")
    root = Path(env).resolve() if env else git.common_dir(repo) / "coord"
    return Layout(repo=repo, root=root)


def ensure(lay: Layout) -> None:
    for sub in ("", "inbox/tmp", "inbox/new", "inbox/cur", "inbox/old", "inbox/quarantine",
                "handoffs"):
        (lay.root / sub).mkdir(parents=True, exist_ok=True)


# A state document of an older version is open JSON until the last migration hands it to
# State.model_validate.
def _to_v2(doc: dict[str, Any]) -> dict[str, Any]:
    return {**doc, "version": 2}  # new fields all have defaults


# MIGRATIONS[v] turns a version-v state document into version v + 1.
MIGRATIONS = {1: _to_v2}


# Per state file, the bytes this process last read or wrote and the State they were read
# into or written from: a caller that hands that State back (`reuse`) gets it again, unparsed,
# while the file still holds those bytes (parse once per command).
_SEEN: dict[Path, tuple[bytes, State]] = {}


def load(lay: Layout, reuse: State | None = None) -> State:
    """The state. `reuse`: a State this process read or saved itself, returned as it is
    when the file still holds what it was read from or saved as (nobody wrote since), so
    a command parses the state once; what the caller changed in it since travels along."""
    return _load(lay, reuse)[0]


def read(lay: Layout) -> tuple[State, bytes]:
    """The state and the bytes it was read from, without the lock: a command that prepares
    its change outside the lock checks under it that `state_bytes` are still these."""
    return _load(lay)


def state_bytes(lay: Layout) -> bytes:
    """The state file's bytes (empty when there is no state yet)."""
    try:
        return lay.state_file.read_bytes()
    except FileNotFoundError:
        return b""


def _load(lay: Layout, reuse: State | None = None) -> tuple[State, bytes]:
    """The state and the bytes it was read from (empty when there is no state yet)."""
    try:
        data = lay.state_file.read_bytes()
    except FileNotFoundError:
        return State(), b""
    except OSError as e:  # a directory, no permission...
        raise UsageError(f"{lay.state_file}: cannot read the state ({e.strerror or e}); "
                         "restore it from a backup or move it aside") from None
    seen = _SEEN.get(lay.state_file)
    if reuse is not None and seen is not None and seen[1] is reuse and seen[0] == data:
        return reuse, data
    state = _parse_state(lay, data)
    _remember(lay, data, state)
    return state, data


def _remember(lay: Layout, data: bytes, state: State) -> None:
    _SEEN.clear()  # one state file a command works on: a long-lived process keeps no more
    _SEEN[lay.state_file] = (data, state)


def _trusted_loads(data: bytes, fast: bool = True) -> Any:
    """The state hunkwise wrote itself: strict about NaN, without the duplicate-key pass
    that untrusted bytes get (STYLE.md, "Files and concurrency"). `fast`: by orjson, which
    reads a state of 1,000 tasks in 0.4 of the time json does; otherwise by json."""
    if fast:
        import orjson

        return orjson.loads(data)

    def no_constants(name: str) -> Any:
        raise ValueError(f"{name} is not valid JSON")

    return json.loads(data, parse_constant=no_constants)


def _parse_state(lay: Layout, data: bytes) -> State:
    # A state of many tasks is tens of thousands of new objects, none of them in a cycle:
    # the collector would walk them again and again while they are made, for nothing, and
    # twice more as they age. They go straight to the oldest generation instead (freeze
    # and unfreeze), which only a full collection walks.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _parse_state_now(lay, data)
    finally:
        gc.freeze()
        gc.unfreeze()
        if collecting:
            gc.enable()


def _state_of(lay: Layout, doc: Any) -> State:
    version = doc.get("version", 1) if isinstance(doc, dict) else None
    if isinstance(version, int) and version > STATE_VERSION:
        raise UsageError(f"{lay.state_file}: written by a newer hunkwise (state version "
                         f"{version}, this one reads up to {STATE_VERSION}); upgrade hunkwise")
    while isinstance(version, int) and version < STATE_VERSION:
        doc = MIGRATIONS[version](doc)
        version += 1
    return State.model_validate(doc)


def _parse_state_now(lay: Layout, data: bytes) -> State:
    try:
        state = _state_of(lay, _trusted_loads(data))
    except (RecordError, ValueError):
        # What orjson reads otherwise than json (an int past 64 bits, as a float) or
        # refuses (a byte-order mark, an escaped lone surrogate): read by json, as always,
        # and judged on that.
        state = None
    try:
        if state is None:
            state = _state_of(lay, _trusted_loads(data, fast=False))
    except RecordError as e:
        raise UsageError(f"{lay.state_file}: state is unreadable ({e.message}); "
                         "restore it from a backup or move it aside") from None
    except UsageError:
        raise
    except ValueError as e:
        raise UsageError(f"{lay.state_file}: state is unreadable ({str(e).splitlines()[0]}); "
                         "restore it from a backup or move it aside") from None
    # Beyond the schema: what a hand edit can break and no command would write.
    try:
        for key, task in state.tasks.items():
            check_task(task, key)
    except UsageError as e:
        raise UsageError(f"{lay.state_file}: state refused: {e.message}; restore it from a "
                         "backup or move it aside") from None
    return state


ARCHIVE = "archive.jsonl"


def archive(lay: Layout, records: list[ArchiveLine]) -> None:
    """Append finished records ({"kind", "data"}) to the append-only archive, fsynced
    before the state that drops them is saved: a crash in between keeps both copies,
    never neither."""
    if not records:
        return
    ensure(lay)
    with open(lay.root / ARCHIVE, "ab") as f:
        f.writelines(json.dumps(r, sort_keys=True).encode() + b"\n" for r in records)
        f.flush()
        os.fsync(f.fileno())


def archived(lay: Layout, kind: str) -> list[dict[str, Any]]:
    """Every archived record of a kind, oldest first; a torn last line is skipped.

    Open JSON, as read back from a file: what it holds is the caller's kind's dump."""
    try:
        raw = (lay.root / ARCHIVE).read_bytes()
    except FileNotFoundError:
        return []
    out = []
    for line in raw.split(b"\n"):
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("kind") == kind and isinstance(rec.get("data"), dict):
            out.append(rec["data"])
    return out


def _json_form(v: Any) -> Any:
    """What the C encoder cannot write itself: a record, one level deep, keys as JSON
    names them (its lists, dicts, strings, numbers and str enums it writes as they are)."""
    if isinstance(v, Record):
        cls = type(v)
        form = _FORMS.get(cls)
        if form is not None:
            return form(v)
        # Written out (a compile) once a class has been written WARM times in this
        # process, as its reader is (shared/state/schema.py); until then, field by field.
        n = _WRITTEN[cls] = _WRITTEN.get(cls, 0) + 1
        if n >= WARM:
            form = _FORMS[cls] = _form_of(cls)
            return form(v)
        keys = _KEYS.get(cls)
        if keys is None:
            later = cls._written_when_set
            keys = _KEYS[cls] = tuple(
                (name, spec.key or name, spec.omit or name in later,
                 _default_of(spec) if spec.omit or name in later else None)
                for name, spec in cls._decl)
        d = v.__dict__
        for name in _numbers(cls):
            _finite(d[name], f"{cls.__name__}.{name}")
        return {key: d[name] for name, key, omit, default in keys
                if not (omit and d[name] == default)}
    raise TypeError(f"{type(v).__name__} is not JSON")


def _numbers(cls: type[Record]) -> frozenset[str]:
    """The fields a record declares as floats (alone, optional, or in a dict or list):
    json refused to write NaN or an infinity, and orjson writes them as null, a state no
    reader takes back. So these are checked as they are written."""
    got = _NUMBERS.get(cls)
    if got is None:
        notes = {n: str(a) for base in reversed(cls.__mro__)
                 for n, a in base.__dict__.get("__annotations__", {}).items()}
        got = _NUMBERS[cls] = frozenset(n for n, _spec in cls._decl
                                        if "float" in notes.get(n, ""))
    return got


def _finite(x: Any, where: str) -> Any:
    """`x` when it holds no NaN or infinity (a float, or the values of a dict or list)."""
    if x.__class__ is float:
        bad = not math.isfinite(x)
    elif x.__class__ is dict:
        bad = any(v.__class__ is float and not math.isfinite(v) for v in x.values())
    elif x.__class__ is list or x.__class__ is tuple:
        bad = any(v.__class__ is float and not math.isfinite(v) for v in x)
    else:
        return x
    if bad:
        raise ValueError(f"{where} holds a value that is not a finite number ({x!r}); "
                         "the state is not saved")
    return x


def _form_of(cls: type[Record]) -> Callable[[Record], dict[str, Any]]:
    """A record's JSON object, written out as one function: its fields in order, a field
    written only when set (`F(omit=True)`, or a record's `_written_when_set`, which leaves
    a document as an earlier release wrote it) left out while it holds its default."""
    later = cls._written_when_set
    ns: dict[str, Any] = {}
    head: list[str] = []
    tail: list[str] = []
    numbers = _numbers(cls)
    ns["finite"] = _finite
    for i, (name, spec) in enumerate(cls._decl):
        key, at = repr(spec.key or name), repr(name)
        # A float field goes through `_finite` on its way out.
        get = (f"finite(d[{at}], {cls.__name__ + '.' + name!r})" if name in numbers
               else f"d[{at}]")
        if spec.omit or name in later:
            ns[f"D{i}"] = _default_of(spec)
            tail += [f"    x = {get}", f"    if not x == D{i}:", f"        out[{key}] = x"]
        elif tail:
            tail.append(f"    out[{key}] = {get}")
        else:
            head.append(f"{key}: {get}")
    src = "\n".join(["def form(v):", "    d = v.__dict__", f"    out = {{{', '.join(head)}}}",
                     *tail, "    return out"]) + "\n"
    exec(compile(src, f"<json form of {cls.__name__}>", "exec"), ns)  # noqa: S102 - our own source
    return typing.cast(Callable[[Record], dict[str, Any]], ns["form"])


def _default_of(spec: Any) -> Any:
    from hunkwise.shared.state.schema import MISSING

    return spec.factory() if spec.default is MISSING else spec.default


_FORMS: dict[type, Callable[[Record], dict[str, Any]]] = {}
_NUMBERS: dict[type, frozenset[str]] = {}
_WRITTEN: dict[type, int] = {}
_KEYS: dict[type, tuple[tuple[str, str, bool, Any], ...]] = {}


def _dump(state: State) -> bytes:
    """The state as compact JSON, one line (`jq . state.json` shows it indented), written
    by orjson: the record as `model_dump_json(by_alias=True)` gives it, without a walk of
    the whole document in Python first. The same bytes as json's compact encoder without
    ASCII escapes, but for how a float far from 1 writes its exponent (both read back the
    same number), in a third of the time."""
    import orjson

    try:
        return orjson.dumps(state, default=_json_form, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        # What only json writes (a dict key that is a str subclass, an int past 64 bits):
        # the same document by json, slower.
        return json.dumps(state, default=_json_form, ensure_ascii=False, allow_nan=False,
                          separators=(",", ":")).encode() + b"\n"


def save(lay: Layout, state: State) -> None:
    ensure(lay)
    out = _dump(state)
    atomic_write(lay.state_file, out)
    _remember(lay, out, state)


@contextlib.contextmanager
def locked(lay: Layout, timeout: float | None = None, name: str = "lock") -> Iterator[None]:
    """Hold a lock: a separate file that is never replaced or deleted.

    `lock` guards the state's read-modify-writes and is held briefly. `commit` serializes
    the coordinator's own changes to HEAD and the index (accept, revert, discard,
    restore) for their whole run, so no one validates between a HEAD move and the index
    update that follows it; workers never wait for it.
    """
    ensure(lay)
    wait = float(os.environ.get("COORD_LOCK_TIMEOUT", "30")) if timeout is None else timeout
    path = lay.root / name
    release = _acquire(path, wait)
    if release is None:
        raise StateRefused(f"lock {path} is held by another process "
                           f"(waited {wait:g}s); try again")
    try:
        yield
    finally:
        release()


def _acquire(path: Path, wait: float) -> Callable[[], None] | None:
    """Take the exclusive lock on `path` within `wait` seconds (None when it stays held).

    On POSIX this is `flock`, tried without blocking every 5 ms (never a signal-based
    timeout, which a thread could not use); elsewhere portalocker does the same. flock is
    called directly where it exists because portalocker's import alone cost every
    command more than the lock itself.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        import portalocker

        lock = portalocker.Lock(str(path), mode="a", timeout=wait, check_interval=0.01,
                                flags=portalocker.LOCK_EX | portalocker.LOCK_NB)
        try:
            lock.acquire()
        except portalocker.exceptions.LockException:
            return None
        release: Callable[[], None] = lock.release
        return release

    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                return None
            time.sleep(0.005)
            continue
        except BaseException:
            os.close(fd)
            raise
        return lambda: os.close(fd)  # closing the descriptor releases the lock


@contextlib.contextmanager
def transaction(lay: Layout, reuse: State | None = None) -> Iterator[State]:
    """Lock, load, yield the state for changes, save when the block ends without error.

    `reuse`: the State this command read or saved last (see `load`), taken as it is when
    nobody wrote the file since."""
    with locked(lay):
        state, read = _load(lay, reuse)
        try:
            yield state
        except BaseException:
            # Changed and not saved: never to be taken for what the file holds.
            _SEEN.pop(lay.state_file, None)
            raise
        # One serialisation: what would be written, compared with what was read. A state
        # written by this version and left unchanged gives the same bytes, so it is not
        # written again; anything else (a change, a migration, an older indented form) is.
        out = _dump(state)
        if out != (read or _dump(State())):
            ensure(lay)
            atomic_write(lay.state_file, out)
        _remember(lay, out, state)


def now() -> float:
    return time.time()
