"""shared/fastjson.py: json's own C parser and encoder, without importing json, give what
json gives."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys

import pytest
from hunkwise.shared import fastjson


def _value(r: random.Random, depth: int = 0) -> object:
    kind = r.randrange(9 if depth < 4 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return r.random() < 0.5
    if kind == 2:
        return r.randint(-10**20, 10**20)
    if kind == 3:
        return r.choice([0.0, -0.0, 1.5, 1e300, -2.5e-300, r.random() * 10**r.randint(-5, 5)])
    if kind in (4, 5):
        alphabet = "ab \"\\/\n\t\x00\x1f\u00e9\u2028\U0001f600\ud800{}[],:"
        return "".join(r.choice(alphabet) for _ in range(r.randrange(12)))
    if kind in (6, 7):
        return [_value(r, depth + 1) for _ in range(r.randrange(5))]
    return {str(_value(r, 4)): _value(r, depth + 1) for _ in range(r.randrange(5))}


@pytest.mark.parametrize("seed", range(20))
def test_loads_and_dumps_agree_with_json(seed: int) -> None:
    r = random.Random(seed)
    for _ in range(50):
        doc = _value(r)
        text = json.dumps(doc, separators=(",", ":"))
        assert fastjson.dumps(doc) == text
        assert fastjson.loads(text) == json.loads(text)
        pretty = json.dumps(doc, indent=r.choice([None, 2]), ensure_ascii=r.random() < 0.5)
        padded = r.choice(["", " ", "\n\t "]) + pretty + r.choice(["", "\n", "  \r\n"])
        assert fastjson.loads(padded) == json.loads(padded)
        raw = padded.encode("utf-8", "surrogatepass")
        assert fastjson.loads(raw) == json.loads(raw)


def test_constants_read_as_json_reads_them() -> None:
    got = fastjson.loads('[NaN, Infinity, -Infinity]')
    assert math.isnan(got[0]) and got[1:] == [math.inf, -math.inf]
    assert fastjson.dumps([math.inf]) == json.dumps([math.inf], separators=(",", ":"))


@pytest.mark.parametrize("bad", ["", "   ", "{", '{"a":1}x', "[1,]", "{'a': 1}", '"\x00"',
                                 "tru", "1 2", '{"a" 1}', "\ufeff{}"])
def test_what_json_refuses_is_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        json.loads(bad)
    with pytest.raises(ValueError):
        fastjson.loads(bad)


def test_bytes_in_every_encoding_json_reads() -> None:
    for codec in ("utf-8-sig", "utf-16", "utf-16-le", "utf-32"):
        raw = '{"a": ["\u00e9"]}'.encode(codec)
        assert fastjson.loads(raw) == json.loads(raw) == {"a": ["\u00e9"]}


def test_malformed_documents_are_refused_before_json_is_loaded() -> None:
    """The C scanner names its error through json.decoder only once that is imported: in
    a hook process it is not, and the error must still be a ValueError."""
    code = ("import sys; from hunkwise.shared import fastjson\n"
            "for bad in ('{\"a\",1}', '[1,]', '{\"a\":}', '[\"\\\\q\"]'):\n"
            "    assert 'json.decoder' not in sys.modules\n"
            "    try: fastjson.loads(bad)\n"
            "    except ValueError: pass\n"
            "    else: raise SystemExit('accepted ' + bad)\n"
            "    sys.modules.pop('json.decoder', None); sys.modules.pop('json', None)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr


def test_objects_json_cannot_write_are_refused() -> None:
    with pytest.raises(TypeError):
        fastjson.dumps({"a": object()})
