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
      omit_default: bool = False) -> Any:
    """A field with limits; `key` is its name in JSON when that differs (a keyword).

    `omit_default`: the field is not written while it holds its default, so a field added
    later leaves every record written before it byte for byte as it was."""
    con = Constraint(max_length, min_length, ge, gt, le, pattern, check)
    return _Spec(default, default_factory, con, key, omit_default)


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
        return _checked(list_, con)
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
        return _checked(dict_, con)
    if origin is tuple:
        parts = [_compile(a) for a in typing.get_args(tp)]

        def tuple_(v: Any) -> Any:
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
        return _checked(enum, con)
    if tp is str:
        return _checked(_str, con)
    if tp is bool:
        return _checked(_bool, con)
    if tp is int:
        return _checked(_int, con)
    if tp is float:
        return _checked(_float, con)
    if tp is Any:
        return _checked(lambda v: v, con)
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
    cell: list[tuple[list[tuple[Any, Reader]], Reader]] = []

    def plan() -> tuple[list[tuple[Any, Reader]], Reader]:
        if not cell:
            values: list[tuple[Any, Reader]] = []
            fallback = None
            for m in members:
                f = next(f for f in _plan(m) if f.key == key)
                for v in typing.get_args(typing.get_type_hints(m)[f.name]):
                    values.append((v, _reader_of(m)))
                if not f.required and fallback is None:
                    fallback = _reader_of(m)
            cell.append((values, fallback or _reader_of(members[0])))
        return cell[0]

    def tagged(v: Any) -> Any:
        if isinstance(v, members):
            return v
        values, fallback = plan()
        if isinstance(v, dict) and key in v:
            tag = v[key]
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


def _sizer(con: Constraint | None) -> Callable[[Any], None]:
    lo = con.min_length if con else None
    hi = con.max_length if con else None

    def size(v: Any) -> None:
        if hi is not None and len(v) > hi:
            raise RecordError(f"at most {hi} items, not {len(v)}")
        if lo is not None and len(v) < lo:
            raise RecordError(f"at least {lo} items, not {len(v)}")
    return size


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
    return checked


# ---- dumping -------------------------------------------------------------------------

def _dump(v: Any, by_alias: bool) -> Any:
    if isinstance(v, Record):
        fields = _plan(type(v))
        d = v.__dict__
        return {(f.key if by_alias else f.name): _dump(d[f.name], by_alias) for f in fields
                if not (f.omit and d[f.name] == f.default)}
    if isinstance(v, Enum):
        return v.value
    if isinstance(v, list | tuple):
        return [_dump(x, by_alias) for x in v]
    if isinstance(v, dict):
        return {k: _dump(x, by_alias) for k, x in v.items()}
    return v
