"""The strict records: what the state, reports and settings accept, refuse and write back.

`tests/data/state_v2.json` and `tests/data/report_v1.json` were written by the previous
release (whose models a schema library read and wrote): both must be read, and written
back byte for byte, so an upgrade neither refuses nor rewrites what is on disk.
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hunkwise.shared.errors import UsageError
from hunkwise.shared.state import store
from hunkwise.shared.state.models import (
    MAX_TEXT,
    AuditVerdict,
    Checkpoint,
    Claim,
    Decision,
    Freeze,
    GlobGrant,
    Handover,
    Note,
    RangeGrant,
    Saved,
    Signal,
    SignalType,
    State,
    Task,
    TaskState,
    WorkReport,
    parse_grant,
    validate_report,
)
from hunkwise.shared.state.schema import F, Record, RecordError
from hunkwise.shared.state.store import strict_json_loads

DATA = Path(__file__).parent / "data"


def test_a_state_written_by_the_previous_release_is_read_and_written_back_byte_for_byte() -> None:
    """The previous release wrote its state indented; this one reads it, and writes the
    same document back compact (one line, by the C encoder): the same keys in the same
    order, the same values, the indentation alone gone."""
    raw = (DATA / "state_v2.json").read_bytes()
    state = State.model_validate(strict_json_loads(raw))
    assert state.tasks["T2"].state is TaskState.CHANGES_REQUESTED
    assert state.signals[0].sender.startswith("sess-")
    assert state.freeze is not None and state.freeze.deferred == ["T3"]
    assert state.model_dump_json(indent=1, by_alias=True).encode() == raw
    compact = json.dumps(json.loads(raw), ensure_ascii=False, separators=(",", ":"))
    assert store._dump(state) == compact.encode() + b"\n"


def test_a_report_written_by_the_previous_release_is_read_and_written_back_byte_for_byte() -> None:
    raw = (DATA / "report_v1.json").read_bytes()
    report = validate_report(strict_json_loads(raw))
    assert isinstance(report, WorkReport)
    assert report.changes[0].hunks[0].old_start == 2
    assert report.model_dump_json().encode() == raw


def test_an_audit_verdict_is_read_as_one_and_written_back_byte_for_byte() -> None:
    doc = {**strict_json_loads((DATA / "report_v1.json").read_bytes()), "changes": [],
           "kind": "review", "role": "security", "verdict": "approve"}
    raw = json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()
    report = validate_report(strict_json_loads(raw))
    assert isinstance(report, AuditVerdict) and report.verdict == "approve"
    assert report.model_dump_json().encode() == raw
    # Read as before the two kinds were told apart: a verdict without its role and verdict,
    # a report with no kind (a work report).
    bare = validate_report({**doc, "role": None, "verdict": None})
    assert isinstance(bare, AuditVerdict) and bare.verdict is None
    no_kind = {k: v for k, v in doc.items() if k not in ("kind", "role", "verdict")}
    assert isinstance(validate_report(no_kind), WorkReport)


def test_grants_are_read_as_the_kind_they_name() -> None:
    state = State.model_validate(strict_json_loads((DATA / "state_v2.json").read_bytes()))
    ranged, glob = state.tasks["T1"].grants[0], state.tasks["T2"].grants[0]
    assert isinstance(ranged, RangeGrant) and str(ranged) == "app.py:1-5"
    # A glob grant holds no lines; it keeps the 0 and 0 every grant was written with.
    assert isinstance(glob, GlobGrant) and str(glob) == "docs/**"
    assert glob.model_dump() == {"kind": "glob", "path": "docs/**", "start": 0, "end": 0}
    assert isinstance(parse_grant("a.txt:3"), RangeGrant)
    assert parse_grant("src/**") == GlobGrant(kind="glob", path="src/**")


def _text(rng: random.Random, n: int = 12) -> str:
    alphabet = "abcXYZ 09-_/.:\"\\\n\tü✓\u200b"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, n)))


def _saved(rng: random.Random) -> Saved:
    return Saved(kind=rng.choice(["report", "wip", "handoff"]), revision=rng.randint(1, 9),
                 tree="a" * 40, base=rng.choice([None, "b" * 40]), at=rng.random() * 2e9,
                 ref=f"refs/hunkwise/x/{rng.randint(0, 99)}",
                 hunks={f"f{i}.txt": [(rng.randint(0, 99), rng.randint(0, 9), "c" * 64)]
                        for i in range(rng.randint(0, 3))},
                 whole={f"w{i}": "d" * 40 for i in range(rng.randint(0, 2))})


def _task(rng: random.Random, i: int) -> Task:
    grants = [parse_grant(rng.choice(["src/**", "a.txt:3-9", "docs/", "b.py:1"]))
              for _ in range(rng.randint(1, 3))]
    return Task(
        id=f"T{i}", title=_text(rng), expect=_text(rng), state=rng.choice(list(TaskState)),
        batch=rng.randint(1, 5), grants=grants, checks=[_text(rng) for _ in range(rng.randint(0, 2))],
        exclusive=rng.random() < 0.3, session=rng.choice([None, "sess-20260101-0000-w@m"]),
        claim=rng.choice([None, Claim(session="s", opened=1.5, heartbeat=2.0, ttl=60)]),
        revision=rng.randint(0, 5),
        notes=[Note(at=rng.random(), by="c", kind="k", text=_text(rng)) for _ in range(rng.randint(0, 2))],
        created_at=rng.random() * 2e9, updated_at=float(rng.randint(0, 2**40)),
        last_report=rng.choice([None, "r1"]), commit=rng.choice([None, "e" * 40]),
        audit={"review": "approved"} if rng.random() < 0.3 else {},
        inherited={"a.txt": ["x", "y"]} if rng.random() < 0.3 else {},
        claimed={"b.py": ["z"]} if rng.random() < 0.5 else {},
        saved=rng.choice([None, _saved(rng)]),
        handover=rng.choice([None, Handover(machine="laptop", held=_saved(rng), brought=1,
                                            pending=(2, "laptop", "a" * 40, "b" * 40))]))


def _state(rng: random.Random) -> State:
    st = State(next_task=rng.randint(1, 99), batch=rng.randint(1, 9))
    for i in range(rng.randint(0, 6)):
        t = _task(rng, i)
        st.tasks[t.id] = t
    st.signals = [Signal(id=f"sig-{i}", sender="s", to="*", type=rng.choice(list(SignalType)),
                         about=_text(rng), payload=_text(rng), created_at=1.0, acked_by=["a"])
                  for i in range(rng.randint(0, 3))]
    st.decisions = [Decision(id="d-1", task="T0", session="s", question=_text(rng), kind="scope",
                             asked_at=3.0, batch=1)] if rng.random() < 0.5 else []
    if rng.random() < 0.5:
        st.checkpoints["s|T0"] = Checkpoint(task="T0", session="s", at=1.0, next=_text(rng),
                                            saved=rng.choice([None, _saved(rng)]))
    if rng.random() < 0.3:
        st.freeze = Freeze(commit=None, batch=1, deferred=["T1"], by="c", at=2.0,
                           fingerprint="f", tree="t", index="i")
    st.next_id("sig", "20260101")
    return st


@pytest.mark.parametrize("seed", range(40))
def test_any_state_survives_its_own_round_trip(seed: int) -> None:
    state = _state(random.Random(seed))
    text = state.model_dump_json(indent=1, by_alias=True)
    back = State.model_validate(strict_json_loads(text))
    assert back == state
    assert back.model_dump_json(indent=1, by_alias=True) == text
    assert store._dump(back) == state.model_dump_json(by_alias=True).encode() + b"\n"
    assert json.loads(text)["signals"] == [s.public() | {"acked_by": s.acked_by} for s in state.signals]


BASE = strict_json_loads((DATA / "state_v2.json").read_bytes())


def _set(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    node = doc
    for p in path[:-1]:
        node = node[p]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return doc


BAD_STATES = [
    (("tasks", "T1", "revision"), "1", "tasks.T1.revision: expected an integer, not a string"),
    (("tasks", "T1", "revision"), True, "tasks.T1.revision: expected an integer, not a boolean"),
    (("tasks", "T1", "revision"), 1.5, "tasks.T1.revision: expected an integer, not a number"),
    (("tasks", "T1", "state"), "bogus", "tasks.T1.state: expected one of"),
    (("tasks", "T1", "colour"), "red", "tasks.T1.colour: unknown field"),
    (("tasks", "T1", "title"), KeyError, "tasks.T1.title: missing"),
    (("tasks", "T1", "title"), "x" * (MAX_TEXT + 1), "tasks.T1.title: at most 65536 characters"),
    (("tasks", "T1", "grants", 0, "start"), -1, "tasks.T1.grants.0.start: must be at least 0"),
    (("tasks", "T1", "grants", 0, "kind"), "regex",
     "tasks.T1.grants.0.kind: expected one of 'glob', 'range', 'point', not 'regex'"),
    (("tasks", "T1", "grants", 0, "kind"), KeyError, "tasks.T1.grants.0.kind: missing"),
    (("tasks", "T2", "grants", 0, "path"), 7, "tasks.T2.grants.0.path: expected a string"),
    (("tasks", "T2", "saved", "hunks", "docs/a.md", 0), [1, 2],
     "tasks.T2.saved.hunks.docs/a.md.0: expected a list of 3"),
    (("signals", 0, "from"), KeyError, "signals.0.from: missing"),
    (("signals", 0, "created_at"), None, "signals.0.created_at: expected a number, not null"),
    (("freeze",), [], "freeze: expected an object, not a list"),
    (("sessions",), {"s": "soon"}, "sessions.s: expected a number, not a string"),
]


@pytest.mark.parametrize(("path", "value", "expected"), BAD_STATES,
                         ids=[".".join(map(str, b[0])) + f"={b[1]!r:.12}" for b in BAD_STATES])
def test_a_malformed_state_is_refused_in_one_line_naming_the_field(tmp_path: Path, path: tuple[Any, ...],
                                                                  value: Any, expected: str) -> None:
    lay = store.Layout(tmp_path, tmp_path / "coord")
    lay.root.mkdir(parents=True, exist_ok=True)
    data = json.dumps(_set(BASE, path, value)).encode()
    lay.state_file.write_bytes(data)
    with pytest.raises(UsageError) as e:
        store.load(lay)
    assert "state is unreadable (invalid " + expected in e.value.message
    assert "\n" not in e.value.message
    assert lay.state_file.read_bytes() == data  # nothing rewritten


REPORT = strict_json_loads((DATA / "report_v1.json").read_bytes())


@pytest.mark.parametrize(("path", "value", "expected"), [
    (("changes", 0, "path"), "../etc/passwd", "changes.0.path: path '../etc/passwd': '..' would leave"),
    (("changes", 0, "path"), ".git/hooks/pre-commit", "changes.0.path: path '.git/hooks/pre-commit'"),
    (("changes", 0, "old_path"), "/abs", "changes.0.old_path: path '/abs': absolute"),
    (("changes", 0, "hunks", 0, "sha256"), "F" * 64, "changes.0.hunks.0.sha256: does not match"),
    (("changes", 0, "hunks", 0, "old_lines"), 10**9 + 1, "changes.0.hunks.0.old_lines: must be at most"),
    (("changes", 0, "new_mode"), "10644", "changes.0.new_mode: does not match"),
    (("task_id",), "../x", "task_id: malformed task id"),
    (("schema_version",), 2, "schema_version: expected one of 1"),
    (("schema_version",), True, "schema_version: expected one of 1"),
    (("proposed_commit", "subject"), "", "proposed_commit.subject: at least 1 characters"),
    (("revision",), 0, "revision: must be at least 1"),
    (("checks",), [{}] * 1001, "checks: at most 1000 items"),
    (("status",), "DONE", "status: expected one of 'done', 'blocked', 'failed'"),
    (("extra",), 1, "extra: unknown field"),
    (("kind",), "audit", "kind: expected one of 'task', 'review', not 'audit'"),
    (("kind",), True, "kind: expected one of 'task', 'review', not True"),
])
def test_a_malformed_report_is_refused_naming_the_field(path: tuple[Any, ...], value: Any,
                                                        expected: str) -> None:
    data = json.dumps(_set(REPORT, path, value)).encode()
    with pytest.raises(UsageError) as e:
        store.parse_untrusted(data, validate_report, "report r1", 1 << 24, "report")
    assert f"report r1: does not match the report schema (invalid {expected}" in e.value.message


def test_a_value_over_its_limit_is_refused_where_it_is_made() -> None:
    with pytest.raises(RecordError) as e:
        Note(at=0.0, by="c", kind="k", text="x" * (MAX_TEXT + 1))
    assert e.value.message == "invalid text: at most 65536 characters, not 65537"
    with pytest.raises(RecordError):
        Claim(session="s", opened=1.0, heartbeat=1.0, ttl="60")  # type: ignore[arg-type]
    with pytest.raises(RecordError):
        GlobGrant(kind="glob", path="a").model_copy(update={"start": -1})
    assert Claim(session="s", opened=1, heartbeat=2, ttl=3).opened == 1.0  # numbers widen


def test_an_oversized_title_is_refused_by_assign_and_changes_nothing(make_repo, coord) -> None:
    repo = make_repo({"a.txt": "a\n"})
    r = coord(repo, "assign", "T1", "--title", "t" * (MAX_TEXT + 1), "--expect", "e",
              "--write", "a.txt")
    assert r.code == 2
    assert r.doc["error"]["message"] == "invalid title: at most 65536 characters, not 65537"
    assert coord(repo, "status").doc["tasks"] == []



class _Base(Record):
    kind: str = "base"
    items: list[int] = F(default_factory=list)


class _Child(_Base):
    note: ClassVar[str] = "not a field"
    name: str
    kind: str = "child"


def test_a_record_declares_its_fields_as_a_keyword_only_dataclass_would() -> None:
    """Fields come after the bases' (a redeclared one keeps its place), defaults and
    factories fill what is not given, and a missing or unknown keyword is a TypeError."""
    c = _Child(name="x")
    assert [n for n, _ in _Child._decl] == ["kind", "items", "name"]
    assert c.model_dump() == {"kind": "child", "items": [], "name": "x"}
    assert c.items is not _Child(name="y").items  # a factory per instance
    assert _Child.kind == "child" and _Child.note == "not a field"
    with pytest.raises(TypeError, match="missing required keyword argument: 'name'"):
        _Child()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'nmae'"):
        _Child(name="x", nmae="y")  # type: ignore[call-arg]
    assert c.model_copy(update={"kind": "other"}) == _Child(name="x", kind="other")
    with pytest.raises(ValueError, match="mutable default"):
        class Bad(Record):
            items: list[int] = []  # noqa: RUF012


# ---- the written-out readers read as the generic one --------------------------------

_JUNK: list[Any] = [None, True, False, 0, -1, 7, 2**40, 1.5, -0.0, float("inf"), "", "x", "glob",
                    "range", "approved", "report", "a" * 64, "A" * 64, "x" * (MAX_TEXT + 1),
                    [], [1], ["a"], [[1, 2, "c" * 64]], {}, {"a": 1}, {"kind": "glob"}]


def _paths(node: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [at] if at else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*at, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*at, i))
    return out


def _mutated(doc: Any, rng: random.Random) -> Any:
    """`doc` with one to three random changes: a value replaced, a key dropped or added."""
    doc = copy.deepcopy(doc)
    for _ in range(rng.randint(1, 3)):
        paths = _paths(doc)
        if not paths:
            break
        path = rng.choice(paths)
        node = doc
        for p in path[:-1]:
            node = node[p]
        move = rng.random()
        if move < 0.6:
            node[path[-1]] = rng.choice(_JUNK)
        elif move < 0.8 and isinstance(node, dict):
            del node[path[-1]]
        elif isinstance(node, dict):
            node[rng.choice(["extra", "kind", "brief", "launch", "recheck", "symbol", "from"])] = \
                rng.choice(_JUNK)
    return doc


def _outcome(read: Any, doc: Any) -> Any:
    try:
        return ("read", read(doc))
    except RecordError as e:
        return ("refused", str(e), e.loc)


@pytest.mark.parametrize("seed", range(30))
def test_a_record_read_by_its_written_out_reader_reads_as_by_the_generic_one(seed: int) -> None:
    """A record read many times in one process (a state of many tasks, a report of many
    hunks) is read by a reader written out for its class: on any document, valid or not,
    it gives the same record or the same refusal (message and place) as the generic one."""
    from hunkwise.shared.state import schema

    rng = random.Random(seed)
    state = _state(rng)
    cases: list[tuple[type[Record], Any]] = [(State, state.model_dump(by_alias=True))]
    cases += [(Task, t.model_dump(by_alias=True)) for t in state.tasks.values()]
    cases += [(WorkReport, REPORT), (State, BASE)]
    for cls, doc in cases:
        fast, generic = schema._generated_reader(cls), schema._generic_reader(cls)
        assert _outcome(fast, doc) == _outcome(generic, doc)
        for _ in range(40):
            bad = _mutated(doc, rng)
            assert _outcome(fast, bad) == _outcome(generic, bad), bad


def _made(cls: type[Record], values: dict[str, Any], generated: bool) -> Any:
    from hunkwise.shared.state import schema

    obj = cls.__new__(cls)
    try:
        if generated:
            schema._generated_init(cls)(obj, dict(values))
        else:
            schema._INITS.pop(cls, None)
            schema._MADE[cls] = -10**9  # the generic __init__, not warming into another
            cls.__init__(obj, **values)
        return ("made", obj)
    except (RecordError, TypeError) as e:
        return ("refused", type(e).__name__, str(e))


@pytest.mark.parametrize("seed", range(8))
def test_a_record_made_by_its_written_out_init_is_made_as_by_the_generic_one(seed: int) -> None:
    """A record made many times in one process (a report's hunks, a task's merged ranges)
    is made by an `__init__` written out for its class: from any keyword arguments it
    makes the same record, or refuses with the same error, as the generic one."""
    from hunkwise.shared.state.models import ChangeEntry, HunkEntry

    rng = random.Random(seed)
    state = _state(rng)
    made: list[tuple[type[Record], dict[str, Any]]] = []
    for t in state.tasks.values():
        made.append((Task, dict(t.__dict__)))
        made += [(type(g), dict(g.__dict__)) for g in t.grants]
    report = validate_report(REPORT)
    assert isinstance(report, WorkReport)
    made += [(ChangeEntry, dict(e.__dict__)) for e in report.changes]
    made += [(HunkEntry, dict(h.__dict__)) for e in report.changes for h in e.hunks]
    try:
        for cls, values in made:
            assert _made(cls, values, True) == _made(cls, values, False)
            for _ in range(30):
                bad = dict(values)
                move = rng.random()
                name = rng.choice(sorted(bad))
                if move < 0.6:
                    bad[name] = rng.choice(_JUNK)
                elif move < 0.8:
                    del bad[name]
                else:
                    bad[rng.choice(["extra", "kind", "symbol"])] = rng.choice(_JUNK)
                assert _made(cls, bad, True) == _made(cls, bad, False), (cls, bad)
    finally:
        from hunkwise.shared.state import schema

        schema._MADE.clear()


@pytest.mark.parametrize("seed", range(20))
def test_a_record_written_by_its_written_out_form_is_written_as_by_the_generic_one(seed: int) -> None:
    """A record written many times in one process (a state of many tasks) is written by a
    function written out for its class: the same keys, in the same order, with the same
    values as the generic form, fields written only when set left out alike."""
    rng = random.Random(seed)
    state = _state(rng)
    records: list[Record] = [state, *state.tasks.values(), *state.signals, *state.decisions,
                             *state.checkpoints.values()]
    for t in state.tasks.values():
        records += [*t.grants, *t.notes]
        records += [r for r in (t.claim, t.saved, t.handover) if r is not None]
    for r in records:
        cls = type(r)
        store._FORMS.pop(cls, None)
        store._WRITTEN.pop(cls, None)
        generic = store._json_form(r)  # the first of its class: field by field
        assert list(store._form_of(cls)(r).items()) == list(generic.items())
    store._FORMS.clear()
    store._WRITTEN.clear()
