"""Scoreboard control of one SASS line: wait mask, read/write barriers and stall count (paper Sec. 4)."""
from __future__ import annotations

import re
from dataclasses import dataclass

from hybridperf.advise.gpa.errors import SASSSyntaxError

__all__ = ["Control", "sass_error", "split_control"]

_CUASM = re.compile(r"^\[B([0-5-]{6}):R([0-5-]):W([0-5-]):([Y-]):S(\d{1,2})\]\s*")
_MAXAS = re.compile(r"^([0-9a-fA-F]{2}|--):([0-5-]):([0-5-]):([Y-]):([0-9a-fA-F])\s+")
_REQ = re.compile(r"&req=\{([^}]*)\}")
_BARRIER_SET = re.compile(r"&(rd|wr|wr_early)=0x([0-9a-fA-F]+)")
_SCHED = re.compile(r"\?([A-Za-z0-9_]+)")
_WAIT_STALL = re.compile(r"^(?:WAIT(\d+)(?:_END_GROUP)?|trans(\d+))$")


@dataclass(frozen=True, slots=True)
class Control:
    """The scoreboard control of one instruction.

    ``waits`` are the barriers B0-B5 it waits on (its wait mask); ``write_barrier`` and
    ``read_barrier`` the ones it sets; ``stall_cycles`` its fixed stall count.
    """

    waits: frozenset[int] = frozenset()
    write_barrier: int | None = None
    read_barrier: int | None = None
    stall_cycles: int | None = None


def sass_error(text: str, why: str) -> SASSSyntaxError:
    """The error for SASS ``text`` that cannot be parsed, saying why."""
    return SASSSyntaxError(f"cannot parse SASS {text!r}: {why}")


def _barrier(digit: str) -> int | None:
    return None if digit == "-" else int(digit)


def _maxas_waits(text: str, mask_hex: str) -> frozenset[int]:
    if mask_hex == "--":
        return frozenset()
    mask = int(mask_hex, 16)
    if mask >= 64:
        raise sass_error(text, f"wait mask 0x{mask:x} names a barrier above B5")
    return frozenset(i for i in range(6) if mask >> i & 1)


def _prefix(text: str, body: str) -> tuple[str, Control]:
    """Strip a CuAssembler ``[B01----:R2:W3:Y:S04]`` or maxas ``03:2:3:Y:4`` prefix."""
    m = _CUASM.match(body)
    if m:
        waits = frozenset(int(c) for c in m.group(1) if c != "-")
        return body[m.end():], Control(waits, _barrier(m.group(3)), _barrier(m.group(2)), int(m.group(5)))
    m = _MAXAS.match(body)
    if m:
        waits = _maxas_waits(text, m.group(1))
        return body[m.end():], Control(waits, _barrier(m.group(3)), _barrier(m.group(2)), int(m.group(5), 16))
    return body, Control()


def _required(text: str, body: str) -> set[int]:
    """The barriers of nvdisasm's ``&req={0,1}`` wait masks."""
    waits: set[int] = set()
    for m in _REQ.finditer(body):
        for tok in m.group(1).split(","):
            tok = tok.strip()
            if not tok.isdigit() or int(tok) > 5:
                raise sass_error(text, f"&req={{{m.group(1)}}} must list barrier indices 0-5")
            waits.add(int(tok))
    return waits


def _barriers_set(text: str, body: str, wr: int | None, rd: int | None) -> tuple[int | None, int | None]:
    """(write, read) barrier after nvdisasm's ``&wr=0x0``/``&rd=0x1``; the last one written wins."""
    for m in _BARRIER_SET.finditer(body):
        idx = int(m.group(2), 16)
        if idx > 5:
            raise sass_error(text, f"&{m.group(1)}=0x{idx:x} is not a barrier index 0-5")
        if m.group(1) == "rd":
            rd = idx
        else:
            wr = idx
    return wr, rd


def _stall(body: str, stall: int | None) -> int | None:
    """Stall cycles after nvdisasm's ``?trans1``/``?WAIT4_END_GROUP`` scheduling; the last one wins."""
    for m in _SCHED.finditer(body):
        w = _WAIT_STALL.match(m.group(1))
        if w:
            stall = int(w.group(1) or w.group(2))
    return stall


def split_control(text: str, body: str) -> tuple[str, Control]:
    """Separate the scoreboard control of ``body`` (an instruction of the SASS ``text``) from it.

    Accepted: a CuAssembler ``[B01----:R2:W3:Y:S04]`` or maxas ``03:2:3:Y:4`` (hex wait mask)
    prefix, then nvdisasm's ``&req={..}`` wait masks, ``&rd=0x.``/``&wr=0x.`` barriers and
    ``?name`` scheduling anywhere; the inline annotations extend (waits) or override the prefix.

    Returns
    -------
    tuple
        The instruction text without its control, and the control.

    Raises
    ------
    SASSSyntaxError
        A barrier index above 5 or an unknown ``&``/``?`` annotation.
    """
    body, prefix = _prefix(text, body)
    waits = prefix.waits | _required(text, body)
    wr, rd = _barriers_set(text, body, prefix.write_barrier, prefix.read_barrier)
    stall = _stall(body, prefix.stall_cycles)
    body = _SCHED.sub(" ", _BARRIER_SET.sub(" ", _REQ.sub(" ", body)))
    if "&" in body or "?" in body:
        raise sass_error(text, "unknown control annotation (accepted: &req={..} &rd=0x. &wr=0x. ?name)")
    return body.strip(), Control(frozenset(waits), wr, rd, stall)
