"""A checked booster document as xgboost's UBJSON model bytes, so that xgboost reads only bytes made here."""
# xgboost's JSON reader took 0.14 s of each load of the shipped model (two 2.6 MB boosters) after
# hybridperf.learn.booster.check_booster had already parsed and checked the same text; its UBJSON reader takes
# 0.02 s. The layout is xgboost's own (Booster.save_raw("ubj"), src/common/json.cc): big-endian, every length an
# int64 "L", objects "{" ... "}" with keys as length-prefixed bytes, arrays with a count ("[#L n" and their items,
# no closing bracket), typed arrays "[$T#L n" followed by the raw values, integers in the smallest of int8 / int16 /
# int32 / int64 that holds them strictly inside its range, numbers as float32 "d". The tests check that a document
# encodes to the bytes xgboost itself saves for the same booster.
# No library does this: py-ubjson, the one UBJSON package, writes no typed arrays and was last released in 2020.
from __future__ import annotations

import functools
import struct
from typing import Any

import numpy as np

__all__ = ["encode"]

# numpy dtype -> UBJSON marker of a typed array (the four xgboost writes).
_TYPED = {np.dtype(np.float32): (b"d", ">f4"), np.dtype(np.int32): (b"l", ">i4"),
          np.dtype(np.int64): (b"L", ">i8"), np.dtype(np.uint8): (b"U", "u1")}
# Integers: the first type whose range holds the value strictly inside, as xgboost writes them (127 is int16).
_INT = ((-2**7, 2**7 - 1, b"i", ">b"), (-2**15, 2**15 - 1, b"I", ">h"), (-2**31, 2**31 - 1, b"l", ">i"))


def _count(n: int) -> bytes:
    return b"L" + struct.pack(">q", n)


def _int(value: int) -> bytes:
    for lo, hi, marker, fmt in _INT:
        if lo < value < hi:
            return marker + struct.pack(fmt, value)
    return b"L" + struct.pack(">q", value)  # struct.error beyond int64


@functools.lru_cache(maxsize=256)
def _short_key(name: str) -> bytes:
    raw = name.encode("utf-8")
    return _count(len(raw)) + raw


def _key(name: str) -> bytes:
    """An object key: a booster's few short names encoded once; a long one (only a hand-made file has it) each
    time, so that no file can fill the cache with megabytes of keys."""
    if len(name) <= 64:
        return _short_key(name)
    raw = name.encode("utf-8")
    return _count(len(raw)) + raw


def _scalar(value: Any) -> bytes:
    if isinstance(value, str):
        raw = value.encode("utf-8")
        return b"S" + _count(len(raw)) + raw
    if isinstance(value, bool):
        return b"T" if value else b"F"
    if isinstance(value, int):
        return _int(value)
    if isinstance(value, float):
        return b"d" + struct.pack(">f", value)
    if value is None:
        return b"Z"
    raise TypeError(f"cannot encode {type(value).__name__} as UBJSON")


def _write(value: Any, out: list[bytes]) -> None:
    # Most items of a booster are a tree's arrays and keys: tested first, keys encoded once.
    if isinstance(value, np.ndarray):
        marker, dtype = _TYPED[value.dtype]
        out.append(b"[$" + marker + b"#" + _count(len(value)) + value.astype(dtype, copy=False).tobytes())
    elif isinstance(value, dict):
        out.append(b"{")
        for key, item in value.items():
            out.append(_key(key))
            _write(item, out)
        out.append(b"}")
    elif isinstance(value, list):
        out.append(b"[#" + _count(len(value)))
        for item in value:
            _write(item, out)
    else:
        out.append(_scalar(value))


def encode(doc: Any) -> bytearray:
    """``doc`` (dicts, lists, strings, ints, floats, bools, None and 1-d float32 / int32 / int64 / uint8 numpy
    arrays, which become typed arrays) as UBJSON bytes in xgboost's layout; ValueError for anything else (a
    string that is not valid Unicode, an integer beyond int64, another type)."""
    out: list[bytes] = []
    try:
        _write(doc, out)
    except (UnicodeEncodeError, struct.error, KeyError, TypeError) as exc:  # a lone surrogate, an int past int64
        raise ValueError(f"cannot write it as UBJSON ({' '.join(str(exc).split())[:80]})") from None
    return bytearray(b"".join(out))
