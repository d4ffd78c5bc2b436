"""Strict value objects: dataclass fields read and checked by a small compiled reader.

Every record hunkwise keeps or receives (the state, a worker's report, another machine's
claim, the settings) is a `Record`: a keyword-only dataclass whose annotations are the
schema. `Model.model_validate(doc)` reads a JSON document strictly (unknown keys refused,
types exact: no "5" for 5, no true for 1, no NaN; sizes capped by `F(max_length=...)`,
bounds by `ge`/`gt`/`le`, shapes by `pattern`), and constructing one in code checks the
same rules, so an oversized title is refused where it is typed, not when the state is next
read. `model_dump`, `model_dump_json` and `model_copy` give it back.

Why not a schema library: importing one and building its models cost 80-110 ms on every
command, more than most commands' own work; this reader is compiled once per class, on
first use, and costs nothing to import.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import types
import typing
from collections.abc import Callable
from enum import Enum
from typing import Any, ClassVar, Generic, TypeVar, dataclass_transform

from hunkwise.shared.errors import UsageError

R = TypeVar("R", bound="Record")
_CLASSVAR = re.compile(r"^\s*(?:typing\.)?ClassVar\b")
D = TypeVar("D")
Reader = Callable[[Any], Any]


class RecordError(UsageError, ValueError):
    """A value that breaks its record's schema: where (`loc`) and what (`msg`)."""

    def __init__(self, msg: str, loc: tuple[str | int, ...] = ()) -> None:
        self.loc = loc
        self.msg = msg
        where = ".".join(str(p) for p in loc)
        super().__init__(f"invalid {where}: {msg}" if where else f"invalid input: {msg}")

    def at(self, key: str | int) -> RecordError:
        return RecordError(self.msg, (key, *self.loc))


@dataclasses.dataclass(frozen=True)
class Constraint:
    """Limits on a value: string or list length, numeric bounds, a regular expression
    (searched, so anchor it), and a check that may refuse or normalise the value."""

    max_length: int | None = None
    min_length: int | None = None
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    pattern: str | None = None
    check: Callable[[Any], Any] | None = None


MISSING: Any = dataclasses.MISSING


class _Spec:
    """A field as its class declares it: default or factory, limits, JSON name."""

    __slots__ = ("default", "factory", "con", "key", "omit")

    def __init__(self, default: Any, factory: Any, con: Constraint | None, key: str | None,
                 omit: bool = False) -> None:
        self.default, self.factory, self.con, self.key = default, factory, con, key
        self.omit = omit


def F(default: Any = MISSING, *, default_factory: Any = MISSING,
      key: str | None = None, max_length: int | None = None, min_length: int | None = None,
      ge: float | None = None, gt: float | None = None, le: float | None = None,
      pattern: str | None = None, check: Callable[[Any], Any] | None = None,
      omit: bool = False) -> Any:
    """A field with limits; `key` is its name in JSON when that differs (a keyword).
    `omit`: not written while it holds its default, so a field added later leaves the
    documents written before it byte for byte as they were."""
    con = Constraint(max_length, min_length, ge, gt, le, pattern, check)
    return _Spec(default, default_factory, con, key, omit)


@dataclasses.dataclass(frozen=True)
class _Field:
    name: str
    key: str
    read: Reader
    required: bool
    default: Any
    factory: Any
    omit: bool = False


@dataclass_transform(kw_only_default=True, field_specifiers=(F,))
class Record:
    """Subclasses take their fields, as a keyword-only dataclass would, from their
    annotations (after their bases' fields, in order), and are checked on construction.

    Nothing is generated per class: one `__init__`, equality and repr serve every record
    (generating methods costs an exec each at import, paid by every command)."""

    _fields: ClassVar[tuple[_Field, ...] | None] = None
    _decl: ClassVar[tuple[tuple[str, _Spec], ...]] = ()
    # Fields written only when they differ from their default (see _dump).
    _written_when_set: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, *, init: bool = True, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        cls._fields = None
        # `init=False` (a class only holding the fields its kinds share) is accepted for
        # the type checker's sake: such a class is never built.
        declared: dict[str, _Spec] = {}
        for base in cls.__mro__[-1:0:-1]:
            declared.update(base.__dict__.get("_decl", ()))
        for name, note in cls.__dict__.get("__annotations__", {}).items():
            if _CLASSVAR.match(note if isinstance(note, str) else repr(note)):
                continue
            value = cls.__dict__.get(name, MISSING)
            spec = value if isinstance(value, _Spec) else _Spec(value, MISSING, None, None)
            if isinstance(spec.default, list | dict | set):
                raise ValueError(f"{cls.__name__}.{name}: a mutable default; use default_factory")
            declared[name] = spec
            if isinstance(value, _Spec):  # the class attribute holds the default, as in a dataclass
                if spec.default is MISSING:
                    delattr(cls, name)
                else:
                    setattr(cls, name, spec.default)
        cls._decl = tuple(declared.items())

    def __init__(self, **values: Any) -> None:
        made = _INITS.get(type(self))
        if made is not None:
            made(self, values)
            return
        _warm_init(type(self))
        mine = self.__dict__
        for name, spec in self._decl:
            if name in values:
                mine[name] = values.pop(name)
            elif spec.default is not MISSING:
                mine[name] = spec.default
            elif spec.factory is not MISSING:
                mine[name] = spec.factory()
            else:
                raise TypeError(f"{type(self).__name__}() missing required keyword argument: "
                                f"{name!r}")
        if values:
            raise TypeError(f"{type(self).__name__}() got an unexpected keyword argument "
                            f"{next(iter(values))!r}")
        self.__post_init__()

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]  # mutable, like a dataclass with eq

    def __repr__(self) -> str:
        fields = ", ".join(f"{f.name}={self.__dict__[f.name]!r}" for f in _plan(type(self)))
        return f"{type(self).__name__}({fields})"

    def __post_init__(self) -> None:
        for f in _plan(type(self)):
            try:
                value = f.read(self.__dict__[f.name])
            except RecordError as e:
                raise e.at(f.name) from None
            self.__dict__[f.name] = value

    @classmethod
    def model_validate(cls, doc: Any) -> typing.Self:
        """Read a JSON document (or an instance, returned as it is) strictly."""
        return typing.cast(typing.Self, _reader_of(cls)(doc))

    def model_dump(self, *, mode: str = "json", by_alias: bool = False) -> dict[str, Any]:
        """The record as JSON values: enums as their values, tuples as lists. Keys are the
        field names, or their JSON names with `by_alias`. Typed as open JSON, since every
        record has its own shape: a `Public` record's public() gives its document type."""
        return typing.cast(dict[str, Any], _dump(self, by_alias))

    def model_dump_json(self, *, indent: int | None = None, by_alias: bool = False) -> str:
        return json.dumps(_dump(self, by_alias), indent=indent, ensure_ascii=False,
                          allow_nan=False, separators=None if indent else (",", ":"))

    def model_copy(self, *, update: dict[str, Any] | None = None) -> typing.Self:
        """A shallow copy with some fields replaced (and checked): `update` maps any of the
        record's field names to a value, checked as the field's type on construction."""
        values = {name: self.__dict__[name] for name, _spec in self._decl}
        values.update(update or {})
        return type(self)(**values)


class Public(Generic[D]):
    """A record whose JSON form is, as it is, a document commands print (a TypedDict of
    shared/state/documents.py): `public()` is `model_dump()` typed as that document."""

    def public(self) -> D:
        return typing.cast(D, _dump(self, False))


def reader(tp: Any) -> Reader:
    """A function that reads a value of type `tp` as a record's field of that type is read
    (a union of records marked with `Tag`, say)."""
    return _compile(tp)


# ---- the compiled reader -------------------------------------------------------------

_NONE = type(None)


def _kind(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


def _plan(cls: type[Record]) -> tuple[_Field, ...]:
    if cls.__dict__.get("_fields") is None:
        hints = typing.get_type_hints(cls, include_extras=True)
        out = []
        for name, spec in cls._decl:
            required = spec.default is MISSING and spec.factory is MISSING
            out.append(_Field(name, spec.key or name, _compile(hints[name], spec.con),
                              required, spec.default, spec.factory, spec.omit))
        cls._fields = tuple(out)
    return typing.cast(tuple[_Field, ...], cls._fields)


def _reader_of(cls: type[Record]) -> Reader:
    """The record's reader: the generic one below, until it has read WARM records of its
    class in this process; then one written out for the class (see `_generated_reader`),
    which costs a compile, paid back only where many are read (a state of many tasks, a
    report of many hunks)."""
    read = _READERS.get(cls)
    if read is None:
        read = _READERS[cls] = _warming(cls)
    return read


_READERS: dict[type, Reader] = {}
WARM = 64


def _warming(cls: type[Record]) -> Reader:
    generic = _generic_reader(cls)
    calls = 0
    fast: Reader | None = None

    def read(doc: Any) -> Any:
        nonlocal calls, fast
        if fast is not None:
            return fast(doc)
        calls += 1
        if calls < WARM:
            return generic(doc)
        fast = _generated_reader(cls)
        return fast(doc)
    return read


def _generic_reader(cls: type[Record]) -> Reader:
    def read(doc: Any) -> Any:
        if isinstance(doc, cls):
            return doc
        if not isinstance(doc, dict):
            raise RecordError(f"expected an object, not {_kind(doc)}")
        fields = _plan(cls)
        obj = cls.__new__(cls)
        values = obj.__dict__
        seen = 0
        for f in fields:
            if f.key in doc:
                raw = doc[f.key]
                seen += 1
                if f.key != f.name and f.name in doc:
                    raise RecordError(f"given twice, as {f.key!r} and {f.name!r}", (f.key,))
            elif f.key != f.name and f.name in doc:
                raw = doc[f.name]
                seen += 1
            elif f.required:
                raise RecordError("missing", (f.key,))
            else:
                values[f.name] = f.factory() if f.default is MISSING else f.default
                continue
            try:
                values[f.name] = f.read(raw)
            except RecordError as e:
                raise e.at(f.key) from None
        if seen != len(doc):
            known = {f.key for f in fields} | {f.name for f in fields}
            extra = next((k for k in doc if k not in known), None)
            raise RecordError("unknown field", (str(extra),))
        return obj
    return read


# ---- generated readers ---------------------------------------------------------------
#
# The same reading as the closures above, written out as one function per record (and per
# list or object of values) the first time it is used: each field's common case (a value
# of exactly its type, within its limits) is an inline test that keeps the value as it
# is; anything else goes to the field's own reader, which converts it or raises exactly
# what it raises. What is read, in what order, and every error stay those of the closures.

# Per reader: a test (Python source over one variable) true only for values the reader
# returns unchanged without error, the names that test uses, and whether it is a plain
# value's test (true for every value a record written by hunkwise holds there), not a
# shortcut for some values only (None for an optional record).
_FAST: dict[Any, tuple[str, dict[str, Any], bool]] = {}
# Per reader: "enum" and its members by value (a string naming one reads as that member),
# or "list" / "dict" (an empty one reads as a new empty one).
_SHORT: dict[Any, tuple[str, Any]] = {}


def _fast(read: Reader, var: str, ns: dict[str, Any], tag: str) -> str | None:
    """The test of `read`'s common case on `var` (its names added to `ns` under `tag`)."""
    known = _FAST.get(read)
    if known is None:
        return None
    src, names, _plain = known
    for k, v in names.items():
        ns[f"{k}_{tag}"] = v
    return "(" + src.replace("$", var).replace("@", f"_{tag}") + ")"


def _exec(name: str, src: str, ns: dict[str, Any]) -> Reader:
    ns.update(RecordError=RecordError, _kind=_kind)
    exec(compile(src, f"<record reader {name}>", "exec"), ns)  # noqa: S102 - our own source
    return typing.cast(Reader, ns[name])


def _generated_reader(cls: type[Record]) -> Reader:
    fields = _plan(cls)
    if any(f.key != f.name for f in fields):
        return _generic_reader(cls)
    # Fields a record may leave out (written only when set) are looked for; the others
    # are expected (every record hunkwise writes holds them).
    later = cls._written_when_set
    sometimes = {f.key for f in fields if not f.required and (f.omit or f.name in later)}
    ns: dict[str, Any] = {"cls": cls, "new": cls.__new__,
                          "KNOWN": frozenset(f.key for f in fields),
                          "ALWAYS": frozenset(f.key for f in fields if f.key not in sometimes)}
    plain, rest = _common_case(fields, sometimes, ns)
    lines = ["def read(doc):",
             "    if isinstance(doc, cls):",
             "        return doc",
             "    if doc.__class__ is dict and ALWAYS <= doc.keys() <= KNOWN and "
             + " and ".join(plain or ["True"]) + ":",
             "        obj = new(cls)",
             "        values = obj.__dict__",
             "        values.update(doc)",
             *rest,
             "        return obj",
             "    return generic(doc)"]
    ns["generic"] = _generic_reader(cls)  # anything else: read field by field, as ever
    return _exec("read", "\n".join(lines) + "\n", ns)


def _default_line(i: int, f: _Field, ns: dict[str, Any]) -> str:
    """The statement that gives field `i` its default (a new one from its factory)."""
    ns[f"D{i}"] = f.factory if f.default is MISSING else f.default
    return f"values[{f.key!r}] = D{i}" + ("()" if f.default is MISSING else "")


def _common_case(fields: tuple[_Field, ...], sometimes: set[str],
                 ns: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The common case: an object of the record's fields (those written always, and any
    of the others) whose plain values all pass their tests (`plain`, joined by `and`) is
    taken whole; then only the other fields are read, in order, and the defaults of those
    left out are set (`rest`, the statements that do it)."""
    plain: list[str] = []
    rest: list[str] = []
    for i, f in enumerate(fields):
        ns[f"R{i}"] = f.read
        key = repr(f.key)
        known = _FAST.get(f.read)
        if known is not None and known[2]:
            ok = _fast(f.read, f"doc[{key}]", ns, str(i)) or "True"
            plain.append(f"({key} not in doc or {ok})" if f.key in sometimes else ok)
            if f.key in sometimes:
                rest += [f"        if {key} not in doc:", f"            {_default_line(i, f, ns)}"]
            continue
        test = _fast(f.read, "raw", ns, str(i))
        pad = ""
        if f.key in sometimes:
            rest += [f"        if {key} not in doc:", f"            {_default_line(i, f, ns)}",
                     "        else:"]
            pad = "    "
        rest += [f"        {pad}raw = doc[{key}]"]
        call = ["try:", f"    values[{key}] = R{i}(raw)", "except RecordError as e:",
                f"    raise e.at({key}) from None"]
        short = _SHORT.get(f.read)
        if test is not None:
            rest += [f"        {pad}if not {test}:", *[f"            {pad}{ln}" for ln in call]]
        elif short is not None and short[0] == "enum":
            ns[f"M{i}"] = short[1]
            rest += [f"        {pad}m = M{i}.get(raw) if raw.__class__ is str else None",
                     f"        {pad}if m is not None:",
                     f"            {pad}values[{key}] = m",
                     f"        {pad}else:", *[f"            {pad}{ln}" for ln in call]]
        elif short is not None:  # an empty list or object reads as a new empty one
            rest += [f"        {pad}if raw.__class__ is {short[0]} and not raw:",
                     f"            {pad}values[{key}] = {short[0]}()",
                     f"        {pad}else:", *[f"            {pad}{ln}" for ln in call]]
        else:
            rest += [f"        {pad}{ln}" for ln in call]
    return plain, rest


# Records made in code (not read): the same warming, then a written-out `__init__` that
# takes the keyword arguments and checks them exactly as `Record.__init__` and
# `__post_init__` do (a class of its own `__post_init__` keeps the generic ones).
_INITS: dict[type, Callable[[Any, dict[str, Any]], None]] = {}
_MADE: dict[type, int] = {}


def _warm_init(cls: type[Record]) -> None:
    n = _MADE[cls] = _MADE.get(cls, 0) + 1
    if n >= WARM and cls.__post_init__ is Record.__post_init__:
        _INITS[cls] = _generated_init(cls)


def _generated_init(cls: type[Record]) -> Callable[[Any, dict[str, Any]], None]:
    ns: dict[str, Any] = {"cls_name": cls.__name__}
    lines = ["def init(self, values):", "    mine = self.__dict__"]
    for i, (name, spec) in enumerate(cls._decl):
        at = repr(name)
        lines += [f"    if {at} in values:", f"        mine[{at}] = values.pop({at})"]
        if spec.default is not MISSING:
            ns[f"D{i}"] = spec.default
            lines += ["    else:", f"        mine[{at}] = D{i}"]
        elif spec.factory is not MISSING:
            ns[f"D{i}"] = spec.factory
            lines += ["    else:", f"        mine[{at}] = D{i}()"]
        else:
            lines += ["    else:",
                      "        raise TypeError(f'{cls_name}() missing required keyword argument: '",
                      f"                        f{repr(repr(name))})"]
    lines += ["    if values:",
              "        raise TypeError(f'{cls_name}() got an unexpected keyword argument '",
              "                        f'{next(iter(values))!r}')"]
    for i, f in enumerate(_plan(cls)):
        at = repr(f.name)
        ns[f"R{i}"] = f.read
        test = _fast(f.read, "v", ns, str(i))
        call = ["try:", f"    mine[{at}] = R{i}(v)", "except RecordError as e:",
                f"    raise e.at({at}) from None"]
        lines.append(f"    v = mine[{at}]")
        if test is not None:
            lines += [f"    if not {test}:", *[f"        {ln}" for ln in call]]
        else:
            lines += [f"    {ln}" for ln in call]
    return typing.cast(Callable[[Any, dict[str, Any]], None],
                       _exec("init", "\n".join(lines) + "\n", ns))


def _compile(tp: Any, con: Constraint | None = None) -> Reader:
    """A function that checks (and, for enums, floats and tuples, converts) one value."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        inner, *extra = typing.get_args(tp)
        for e in extra:
            if isinstance(e, Tag):
                return _checked(_tagged(typing.get_args(inner), e.key), con)
            if isinstance(e, Constraint):
                con = e
        return _compile(inner, con)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        others = [_compile(a, con) for a in args if a is not _NONE]
        nullable = _NONE in args

        def union(v: Any) -> Any:
            if v is None and nullable:
                return None
            err: RecordError | None = None
            for r in others:
                try:
                    return r(v)
                except RecordError as e:
                    err = err or e
            raise err or RecordError(f"unexpected {_kind(v)}")
        if nullable and len(others) == 1:
            src, names, plain = _FAST.get(others[0], ("False", {}, False))
            _FAST[union] = (f"$ is None or ({src})", names, plain)
        return union
    if origin is typing.Literal:
        allowed = typing.get_args(tp)

        def literal(v: Any) -> Any:
            for a in allowed:
                if v == a and type(v) is type(a):
                    return a
            raise RecordError(f"expected one of {', '.join(repr(a) for a in allowed)}, not {v!r:.80}")
        return literal
    if origin is list:
        (item_tp,) = typing.get_args(tp)
        item = _compile(item_tp)
        size = _sizer(con)

        def list_(v: Any) -> Any:
            if not isinstance(v, list | tuple):
                raise RecordError(f"expected a list, not {_kind(v)}")
            size(v)
            out = []
            for i, x in enumerate(v):
                try:
                    out.append(item(x))
                except RecordError as e:
                    raise e.at(i) from None
            return out
        read = _checked(list_, con)
        if con is None or (con.check is None and con.min_length is None):
            _SHORT[read] = ("list", None)
        return read
    if origin is dict:
        key_tp, val_tp = typing.get_args(tp)
        key, val = _compile(key_tp), _compile(val_tp)
        size = _sizer(con)

        def dict_(v: Any) -> Any:
            if not isinstance(v, dict):
                raise RecordError(f"expected an object, not {_kind(v)}")
            size(v)
            out = {}
            for k, x in v.items():
                try:
                    out[key(k)] = val(x)
                except RecordError as e:
                    raise e.at(str(k)) from None
            return out
        read = _checked(dict_, con)
        if con is None or (con.check is None and con.min_length is None):
            _SHORT[read] = ("dict", None)
        return read
    if origin is tuple:
        parts = [_compile(a) for a in typing.get_args(tp)]
        # Parts that are plain strings, integers or booleans: a list of exactly those
        # types is the tuple of its items as they are.
        scalars: dict[Reader, type] = {_str: str, _int: int, _bool: bool}
        kinds = tuple(scalars[r] for r in parts) if all(r in scalars for r in parts) else None

        def tuple_(v: Any) -> Any:
            if kinds is not None and v.__class__ is list and tuple(map(type, v)) == kinds:
                return tuple(v)
            if not isinstance(v, list | tuple) or len(v) != len(parts):
                raise RecordError(f"expected a list of {len(parts)}, not {_kind(v)}")
            out = []
            for i, (r, x) in enumerate(zip(parts, v, strict=True)):
                try:
                    out.append(r(x))
                except RecordError as e:
                    raise e.at(i) from None
            return tuple(out)
        return tuple_
    if isinstance(tp, type) and issubclass(tp, Record):
        return _checked(_lazy_record(tp), con)
    if isinstance(tp, type) and issubclass(tp, Enum):
        members = {m.value: m for m in tp}

        def enum(v: Any) -> Any:
            if isinstance(v, tp):
                return v
            if type(v) is str and v in members:
                return members[v]
            raise RecordError(f"expected one of {', '.join(map(repr, members))}, not {v!r:.80}")
        read = _checked(enum, con)
        if read is enum:
            _SHORT[read] = ("enum", members)
        return read
    if tp is str:
        return _checked(_str, con)
    if tp is bool:
        return _checked(_bool, con)
    if tp is int:
        return _checked(_int, con)
    if tp is float:
        return _checked(_float, con)
    if tp is Any:
        return _checked(_any, con)
    raise TypeError(f"no reader for {tp!r}")


class Tag:
    """`Annotated[A | B, Tag("kind")]`: a union of records told apart by one field, a
    Literal in each. A document is read as the record its value names; one without the
    field as the record whose field has a default. Errors read as those of one record
    holding every value: where the field is not the first thing wrong, what is wrong first
    is named (so both kinds are read with the same reader up to that field).

    A plain class: a dataclass would cost an exec per generated method at import."""

    __slots__ = ("key",)

    def __init__(self, key: str) -> None:
        self.key = key


def _tagged(members: tuple[Any, ...], key: str) -> Reader:
    if not members or not all(isinstance(m, type) and issubclass(m, Record) for m in members):
        raise TypeError(f"Tag({key!r}) marks a union of records, not {members!r}")
    # Built at first use: records may name themselves.
    cell: list[tuple[list[tuple[Any, Reader]], Reader, dict[str, Reader]]] = []

    def plan() -> tuple[list[tuple[Any, Reader]], Reader, dict[str, Reader]]:
        if not cell:
            values: list[tuple[Any, Reader]] = []
            fallback = None
            for m in members:
                f = next(f for f in _plan(m) if f.key == key)
                for v in typing.get_args(typing.get_type_hints(m)[f.name]):
                    values.append((v, _reader_of(m)))
                if not f.required and fallback is None:
                    fallback = _reader_of(m)
            by_text: dict[str, Reader] = {}  # the string tags: the first record naming each
            for a, read in values:
                if type(a) is str:
                    by_text.setdefault(a, read)
            cell.append((values, fallback or _reader_of(members[0]), by_text))
        return cell[0]

    def tagged(v: Any) -> Any:
        if isinstance(v, members):
            return v
        values, fallback, by_text = plan()
        if isinstance(v, dict) and key in v:
            tag = v[key]
            if tag.__class__ is str:
                hit = by_text.get(tag)
                if hit is not None:
                    return hit(v)
            for a, read in values:
                if tag == a and type(tag) is type(a):
                    return read(v)
            try:
                return fallback(v)
            except RecordError as e:
                if e.loc != (key,):
                    raise
                allowed = ", ".join(repr(a) for a, _ in values)
                raise RecordError(f"expected one of {allowed}, not {tag!r:.80}", (key,)) from None
        return fallback(v)
    return tagged


def _lazy_record(tp: type[Record]) -> Reader:
    """A nested record's reader, compiled when first needed (records may nest themselves)."""
    cell: list[Reader] = []

    def read(v: Any) -> Any:
        if not cell:
            cell.append(_reader_of(tp))
        return cell[0](v)
    return read


def _str(v: Any) -> Any:
    if not isinstance(v, str):
        raise RecordError(f"expected a string, not {_kind(v)}")
    return v


def _bool(v: Any) -> Any:
    if type(v) is not bool:
        raise RecordError(f"expected a boolean, not {_kind(v)}")
    return v


def _int(v: Any) -> Any:
    if type(v) is not int:
        raise RecordError(f"expected an integer, not {_kind(v)}")
    return v


def _float(v: Any) -> Any:
    if type(v) is float:
        if not math.isfinite(v):
            raise RecordError("expected a finite number")
        return v
    if type(v) is int:
        return float(v)
    raise RecordError(f"expected a number, not {_kind(v)}")


def _any(v: Any) -> Any:
    return v


_FAST.update({_str: ("$.__class__ is str", {}, True), _bool: ("$.__class__ is bool", {}, True),
              _int: ("$.__class__ is int", {}, True), _any: ("True", {}, True),
              _float: ("$.__class__ is float and -INF@ < $ < INF@", {"INF": math.inf}, True)})


def _sizer(con: Constraint | None) -> Callable[[Any], None]:
    lo = con.min_length if con else None
    hi = con.max_length if con else None

    if lo is None and hi is None:
        return _no_size

    def size(v: Any) -> None:
        if hi is not None and len(v) > hi:
            raise RecordError(f"at most {hi} items, not {len(v)}")
        if lo is not None and len(v) < lo:
            raise RecordError(f"at least {lo} items, not {len(v)}")
    return size


def _no_size(v: Any) -> None:
    return None  # no limits on the length


def _checked(read: Reader, con: Constraint | None) -> Reader:
    """`read`, then the constraint's bounds, pattern and check (length limits on strings
    here; a list's and an object's are checked before their items are read)."""
    if con is None or con == Constraint():
        return read
    rx = re.compile(con.pattern) if con.pattern else None
    is_container = read.__name__ in ("list_", "dict_")

    def checked(v: Any) -> Any:
        v = read(v)
        if isinstance(v, str):
            if con.max_length is not None and len(v) > con.max_length:
                raise RecordError(f"at most {con.max_length} characters, not {len(v)}")
            if con.min_length is not None and len(v) < con.min_length:
                raise RecordError(f"at least {con.min_length} characters")
            if rx is not None and not rx.search(v):
                raise RecordError(f"does not match {con.pattern}: {v!r:.80}")
        elif not is_container and isinstance(v, int | float):
            if con.ge is not None and v < con.ge:
                raise RecordError(f"must be at least {con.ge:g}, not {v}")
            if con.gt is not None and v <= con.gt:
                raise RecordError(f"must be more than {con.gt:g}, not {v}")
            if con.le is not None and v > con.le:
                raise RecordError(f"must be at most {con.le:g}, not {v}")
        if con.check is not None:
            v = con.check(v)
        return v
    base = _FAST.get(read)
    if con.check is None and base is not None and read in (_str, _int, _float):
        src, names = base[0], dict(base[1])
        if read is _str:
            if con.max_length is not None:
                src += f" and len($) <= {con.max_length!r}"
            if con.min_length is not None:
                src += f" and len($) >= {con.min_length!r}"
            if rx is not None:
                names["RX"] = rx.search
                src += " and RX@($) is not None"
        else:
            for op, bound in ((">=", con.ge), (">", con.gt), ("<=", con.le)):
                if bound is not None:
                    names[f"B{len(names)}"] = bound
                    src += f" and $ {op} B{len(names) - 1}@"
        _FAST[checked] = (src, names, True)
    return checked


# ---- dumping -------------------------------------------------------------------------

def _dump(v: Any, by_alias: bool) -> Any:
    if isinstance(v, Record):
        fields = _plan(type(v))
        d = v.__dict__
        # Fields added after a record was first written are left out while they hold their
        # default (`F(omit=True)`, or a record's `_written_when_set`), so what an earlier
        # release wrote is written back byte for byte.
        later = type(v)._written_when_set
        return {(f.key if by_alias else f.name): _dump(d[f.name], by_alias) for f in fields
                if not ((f.omit or (later and f.name in later)) and d[f.name] == f.default)}
    if isinstance(v, Enum):
        return v.value
    if isinstance(v, list | tuple):
        return [_dump(x, by_alias) for x in v]
    if isinstance(v, dict):
        return {k: _dump(x, by_alias) for k, x in v.items()}
    return v
