"""JSON for the agent hooks, through the C accelerator `json` itself uses, without
importing `json`.

The hooks start a process on every tool call of every agent; `import json` pulls in `re`
(and with it `enum`, `functools`, `collections`): some 6 ms of a ~20 ms call. The parser
and encoder here are the very C functions `json.loads` and `json.dumps` call (`_json`'s
scanner and encoder), configured as `json`'s defaults are, so the results are the same
(tests/test_fastjson.py holds them together); where the accelerator is missing, `json`
itself serves.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

try:
    import _json
except ImportError:  # pragma: no cover - CPython always builds it
    _json = None  # type: ignore[assignment]

_WHITE = " \t\n\r"
_CONSTANTS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


class _Context:
    """The attributes `_json.make_scanner` reads from a JSONDecoder, at json's defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _CONSTANTS.__getitem__
    memo: dict[Any, Any] = {}


# (The scanner reads these attributes of any object; typeshed names the decoder class.)
_scanner = _json.make_scanner(_Context()) if _json is not None else None  # type: ignore[arg-type]


def loads(text: str | bytes) -> Any:
    """`json.loads(text)`: ValueError for anything that is not one JSON document."""
    if isinstance(text, (bytes, bytearray)):
        raw = bytes(text)
        if _scanner is None or raw.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")) \
                or b"\0" in raw[:4]:
            import json  # a BOM, UTF-16 or UTF-32: json tells them apart

            return json.loads(raw)
        text = raw.decode("utf-8", "surrogatepass")  # as json decodes UTF-8 bytes
    if _scanner is None:  # pragma: no cover
        import json

        return json.loads(text)
    i, n = 0, len(text)
    while i < n and text[i] in _WHITE:
        i += 1
    try:
        value, end = _scanner(text, i)
    except StopIteration:
        raise ValueError("Expecting value") from None
    except SystemError:
        # The scanner raises json.decoder.JSONDecodeError only when json.decoder is loaded
        # already (CPython looks it up in sys.modules alone): json says what is wrong.
        import json

        return json.loads(text)
    while end < n and text[end] in _WHITE:
        end += 1
    if end != n:
        raise ValueError(f"Extra data at {end}")
    return value


def _refuse(o: Any) -> Any:
    raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")


_compact = (_json.make_encoder(None, _refuse, _json.encode_basestring_ascii, None, ":", ",",
                               False, False, True) if _json is not None else None)


def dumps(obj: Any) -> str:
    """`json.dumps(obj, separators=(",", ":"))` (ASCII, no circular check: the hooks write
    plain documents they built themselves)."""
    if _compact is None:  # pragma: no cover
        import json

        return json.dumps(obj, separators=(",", ":"))
    if isinstance(obj, str):
        return str(_json.encode_basestring_ascii(obj))
    return "".join(_compact(obj, 0))
