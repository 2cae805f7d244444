"""Parse one SASS instruction: opcode, operands, predicates, scoreboard barriers, memory space."""
from __future__ import annotations

import re
from dataclasses import dataclass

from hybridperf.advise.gpa.control import sass_error, split_control
from hybridperf.advise.gpa.errors import SASSSyntaxError

__all__ = ["Instruction", "Predicate", "latency_class", "parse_sass"]

#: Opcodes with no register destination (stores, control flow, barriers, cache control).
_NO_DEST = frozenset({
    "ST", "STG", "STS", "STL", "STSM", "RED", "REDG", "REDS", "LDGSTS", "SUST", "SURED",
    "BRA", "BRX", "JMP", "JMX", "CALL", "RET", "EXIT", "KILL", "BREAK", "BPT", "BSSY", "BSYNC",
    "BAR", "MEMBAR", "FENCE", "ERRBAR", "WARPSYNC", "DEPBAR", "LDGDEPBAR", "NOP", "YIELD",
    "CCTL", "CCTLL", "NANOSLEEP", "PREEXIT", "TEXDEPBAR", "SYNCS", "ARRIVES",
})
#: Opcodes whose first two operands are both destinations.
_TWO_DEST = frozenset({
    "ISETP", "FSETP", "DSETP", "HSETP2", "PSETP", "PLOP3", "SHFL", "VOTE", "VOTEU", "UISETP",
    "UPLOP3", "UPSETP",
})
_MEMORY_SPACE = {
    **dict.fromkeys(("LDG", "STG", "ATOMG", "RED", "REDG", "LDGSTS"), "GLOBAL"),
    **dict.fromkeys(("LDS", "STS", "ATOMS", "LDSM", "STSM", "REDS"), "SHARED"),
    **dict.fromkeys(("LDL", "STL"), "LOCAL"),
    **dict.fromkeys(("LD", "ST", "ATOM"), "GENERIC"),
    **dict.fromkeys(("LDC", "ULDC"), "CONSTANT"),
    **dict.fromkeys(("TEX", "TLD", "TLD4", "TMML", "TXD", "TXQ", "TEXS", "TLDS", "TLD4S",
                     "SULD", "SUST", "SUATOM", "SURED"), "TEXTURE"),
}
_STORES = frozenset({"ST", "STG", "STS", "STL", "STSM", "RED", "REDG", "REDS", "SUST", "SURED"})
_SYNC = frozenset({"BAR", "MEMBAR", "WARPSYNC", "FENCE", "ERRBAR", "SYNCS"})
_BLOCK_END = frozenset({"BRA", "BRX", "JMP", "JMX", "RET", "EXIT", "KILL"})
_FP64 = frozenset({"DADD", "DMUL", "DFMA", "DMNMX", "DSET", "DSETP"})
_CONVERT = frozenset({"F2F", "F2I", "I2F", "I2I", "FRND", "F2FP", "I2FP", "F2IP"})
_BITCOUNT = frozenset({"POPC", "FLO", "BREV", "UPOPC", "UFLO", "UBREV"})
_TENSOR = frozenset({"HMMA", "IMMA", "BMMA", "DMMA", "HGMMA", "IGMMA"})
_SHORT_VARIABLE = frozenset({"S2R", "S2UR", "SHFL", "CS2R", "MATCH", "REDUX", "B2R", "BMOV"})
_TYPES_64 = frozenset({"F64", "S64", "U64", "64"})
_TRANSFERS = ("BRA", "BRX", "JMP", "JMX", "CALL")

_COMMENT = re.compile(r"/\*.*?\*/")
_GUARD = re.compile(r"^@(!?)(U?P[T0-6])\s+")
_OPCODE = re.compile(r"^([A-Z][A-Z0-9_]*)((?:\.[A-Za-z0-9_]+)*)(?=\s|$)")
_REGISTER = re.compile(r"(?<![A-Za-z0-9_.])(UPR|PR|UR(?:Z|\d{1,2})|R(?:Z|\d{1,3})|UP(?:T|[0-6])|P(?:T|[0-6]))"
                       r"((?:\.[A-Za-z0-9_]+)*)")
_NUMBER = re.compile(r"^-?(0x[0-9a-fA-F]+|\d+)$")
_LABEL = re.compile(r"^`?\(?\s*(\.?[A-Za-z_$][\w.$]*)\s*\)?$")


@dataclass(frozen=True, slots=True)
class Predicate:
    """A guard predicate such as ``@P0`` (``negated=False``) or ``@!P1`` (``negated=True``)."""

    register: str
    negated: bool = False

    def __str__(self) -> str:
        return ("!" if self.negated else "") + self.register


@dataclass(frozen=True, slots=True)
class Instruction:
    """One parsed SASS instruction.

    ``destinations`` and ``sources`` hold register names after width expansion (``R2`` of a
    64-bit operand yields ``R2`` and ``R3``); predicates appear as ``P0``/``UP0`` and the guard
    predicate is a source. ``RZ``, ``URZ``, ``PT`` and ``UPT`` are constants and never appear.
    ``wait_barriers`` are the scoreboard (virtual barrier) registers B0-B5 the instruction waits
    on (its wait mask, read), ``write_barrier``/``read_barrier`` the ones it sets (written):
    paper Sec. 4, "Virtual barrier registers".
    """

    text: str
    opcode: str
    modifiers: tuple[str, ...]
    guard: Predicate | None
    operands: tuple[str, ...]
    destinations: frozenset[str]
    sources: frozenset[str]
    wait_barriers: frozenset[int] = frozenset()
    write_barrier: int | None = None
    read_barrier: int | None = None
    stall_cycles: int | None = None
    memory_space: str | None = None
    branch_target: int | None = None
    branch_label: str | None = None
    call_target: str | None = None
    reads_constant_bank: bool = False

    @property
    def is_memory(self) -> bool:
        """True for loads, stores and atomics of any memory space."""
        return self.memory_space is not None

    @property
    def is_store(self) -> bool:
        return self.opcode in _STORES or self.opcode == "LDGSTS"

    @property
    def is_sync(self) -> bool:
        """True for barrier-style synchronisation (``BAR.SYNC``, ``MEMBAR``, ``WARPSYNC``)."""
        return self.opcode in _SYNC

    @property
    def is_branch(self) -> bool:
        return self.opcode in ("BRA", "BRX", "JMP", "JMX")

    @property
    def is_call(self) -> bool:
        return self.opcode == "CALL"

    @property
    def ends_block(self) -> bool:
        """True when control may leave the straight line after this instruction."""
        return self.opcode in _BLOCK_END

    @property
    def falls_through(self) -> bool:
        """False for an unconditional jump, return or exit."""
        if self.opcode not in _BLOCK_END:
            return True
        if self.guard is not None:
            return True
        # ``BRA !P0, 0x..`` style: a predicate operand makes the branch conditional.
        return any(re.fullmatch(r"!?U?P[0-6]", op) for op in self.operands)

    @property
    def is_variable_latency(self) -> bool:
        """True when the hardware tracks the result with a scoreboard rather than a fixed stall."""
        return latency_class(self) in ("memory", "shared", "mufu", "convert", "short_variable",
                                       "bitcount")


def latency_class(inst: Instruction) -> str:
    """Latency class of an instruction, the key into ``GPAArch.latency_cycles``."""
    op = inst.opcode
    if inst.memory_space == "SHARED":
        return "shared"
    if inst.memory_space is not None:
        return "memory"
    if op in ("MUFU",):
        return "mufu"
    if op in _CONVERT:
        return "convert"
    if op in _BITCOUNT:
        return "bitcount"
    if op in _FP64:
        return "fp64"
    if op in _TENSOR:
        return "tensor"
    if op in _SHORT_VARIABLE:
        return "short_variable"
    return "arith"


def _split_operands(text: str, rest: str) -> tuple[str, ...]:
    ops: list[str] = []
    depth = 0
    cur: list[str] = []
    pairs = {"[": "]", "{": "}", "(": ")"}
    stack: list[str] = []
    for ch in rest:
        if ch in pairs:
            stack.append(pairs[ch])
            depth += 1
        elif ch in ")]}":
            if not stack or stack.pop() != ch:
                raise sass_error(text, f"unbalanced {ch!r}")
            depth -= 1
        if ch == "," and depth == 0:
            ops.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if stack:
        raise sass_error(text, f"missing {stack[-1]!r}")
    last = "".join(cur).strip()
    if last or ops:
        ops.append(last)
    if any(not op for op in ops):
        raise sass_error(text, "empty operand")
    return tuple(ops)


def _expand(name: str, width: int) -> list[str]:
    if name in ("RZ", "URZ", "PT", "UPT"):
        return []
    if name == "PR":
        return [f"P{i}" for i in range(7)]
    if name == "UPR":
        return [f"UP{i}" for i in range(7)]
    m = re.fullmatch(r"(UR|R|UP|P)(\d+)", name)
    if m is None:  # pragma: no cover - the caller only passes _REGISTER matches
        return []
    prefix, n = m.group(1), int(m.group(2))
    if prefix in ("UP", "P"):
        return [name]
    top = 62 if prefix == "UR" else 254
    return [f"{prefix}{i}" for i in range(n, min(n + max(width, 1), top + 1))]


def _operand_registers(op: str, width: int) -> list[str]:
    """Registers an operand names; ``width`` applies to a plain register operand."""
    regs: list[str] = []
    plain = "[" not in op
    for m in _REGISTER.finditer(op):
        suffix = m.group(2).split(".")
        w = width if plain else 1
        if "64" in suffix:
            w = 2
        elif "128" in suffix:
            w = 4
        if m.group(1).startswith("UR") and op[:m.start()].endswith("desc["):
            w = 2  # a memory descriptor is a 64-bit uniform register pair
        regs.extend(_expand(m.group(1), w))
    return regs


def _access_size(mods: tuple[str, ...]) -> int:
    """Registers per element a memory instruction moves, from its ``.64``/``.128``/``.X4`` modifiers."""
    size = 4 if "128" in mods else 2 if ("64" in mods or any(m in _TYPES_64 for m in mods)) else 1
    if "X4" in mods or "x4" in mods:
        size = 4
    elif "X2" in mods or "x2" in mods:
        size = max(size, 2)
    return size


def _convert_widths(opcode: str, mods: tuple[str, ...], n_src: int) -> tuple[int, list[int]]:
    """A conversion's widths from its type modifiers: ``F2F.F64.F32`` writes 2 registers, reads 1."""
    types = [m for m in mods if re.fullmatch(r"[FSU](8|16|32|64)", m)]
    dest = 2 if types and types[0] in _TYPES_64 else 1
    src_w = 2 if len(types) > 1 and types[1] in _TYPES_64 else (dest if len(types) == 1 and
                                                               opcode == "FRND" else 1)
    return dest, [src_w] * n_src


def _memory_widths(opcode: str, mods: tuple[str, ...], n_src: int) -> tuple[int, list[int]]:
    """Loads write, stores and atomics read, ``_access_size`` registers per data operand."""
    size = _access_size(mods)
    if opcode in _STORES:
        return 1, [size] * n_src
    if opcode.startswith("ATOM") or opcode == "SUATOM":
        return size, [size] * n_src
    return size, [1] * n_src


def _widths(opcode: str, mods: tuple[str, ...], n_ops: int, n_dest: int) -> tuple[int, list[int]]:
    """(destination width, per-source-operand widths) in 32-bit registers."""
    n_src = n_ops - n_dest
    if opcode in _FP64 or (opcode == "DMMA"):
        return 2, [2] * n_src
    if opcode in _TENSOR:
        return 4, ([2] * (n_src - 1) + [4]) if n_src else []  # the accumulator is 4 registers wide
    if opcode in _CONVERT:
        return _convert_widths(opcode, mods, n_src)
    if "WIDE" in mods:
        src = [1] * n_src
        if opcode.endswith("IMAD") and n_src:
            src[-1] = 2
        return 2, src
    if opcode == "CS2R":
        return (1 if "32" in mods else 2), [1] * n_src
    if opcode in _MEMORY_SPACE:
        return _memory_widths(opcode, mods, n_src)
    if "64" in mods:
        return 2, [2] * n_src
    return 1, [1] * n_src


def _guard(text: str, body: str) -> tuple[Predicate | None, str]:
    """The guard predicate (None for none or an always-true ``@PT``) and the text after it."""
    if not body.startswith("@"):
        return None, body
    m = _GUARD.match(body)
    if m is None:
        raise sass_error(text, "guard must look like @P0, @!P1, @PT or @UP0")
    guard = None if m.group(2) in ("PT", "UPT") else Predicate(m.group(2), negated=bool(m.group(1)))
    return guard, body[m.end():]


def _destination_count(opcode: str, ops: tuple[str, ...]) -> int:
    """How many leading operands are written."""
    if opcode in _NO_DEST:
        return 0
    if opcode in _TWO_DEST:
        return min(2, len(ops))
    n_dest = min(1, len(ops))
    while n_dest < len(ops) and re.fullmatch(r"U?P(?:T|[0-6])", ops[n_dest]):
        n_dest += 1  # carry-out predicates: IADD3 R4, P0, P1, R2, R3, RZ
    return n_dest


def _registers(opcode: str, mods: tuple[str, ...], ops: tuple[str, ...],
               guard: Predicate | None) -> tuple[frozenset[str], frozenset[str]]:
    """(destination, source) registers, widths expanded; the guard predicate is a source."""
    n_dest = _destination_count(opcode, ops)
    dest_w, src_w = _widths(opcode, mods, len(ops), n_dest)
    dests: set[str] = set()
    srcs: set[str] = set()
    for i, op in enumerate(ops):
        if i >= n_dest:
            srcs.update(_operand_registers(op, src_w[i - n_dest]))
        elif "[" in op:  # e.g. ATOMS.POPC.INC R0, [URZ] - a destination is never a memory ref
            srcs.update(_operand_registers(op, 1))
        else:
            dests.update(_operand_registers(op, dest_w))
    if guard is not None:
        srcs.add(guard.register)
    return frozenset(dests), frozenset(srcs)


def _depbar_waits(text: str, opcode: str, ops: tuple[str, ...]) -> frozenset[int]:
    """Barriers a ``DEPBAR`` waits on: operands ``SB0``, ``{5,4}`` or ``{B0,B1}``."""
    if opcode != "DEPBAR":
        return frozenset()
    waits: set[int] = set()
    for op in ops:
        for tok in re.findall(r"\bS?B(\d+)\b", op) + (re.findall(r"\d+", op) if op.startswith("{") else []):
            if int(tok) > 5:
                raise sass_error(text, f"DEPBAR barrier {tok} is not an index 0-5")
            waits.add(int(tok))
    return frozenset(waits)


def _transfer_target(opcode: str, ops: tuple[str, ...]) -> tuple[int | None, str | None, str | None]:
    """(branch target, branch label, call target) named by the last operand of a branch or call."""
    if opcode not in _TRANSFERS or not ops:
        return None, None, None
    last = ops[-1]
    num = _NUMBER.match(last)
    if num:
        value = int(num.group(1), 0)
        return (None, None, hex(value)) if opcode == "CALL" else (value, None, None)
    lab = _LABEL.match(last)
    if lab is None or _REGISTER.fullmatch(last):
        return None, None, None
    return (None, None, lab.group(1)) if opcode == "CALL" else (None, lab.group(1), None)


def parse_sass(text: str) -> Instruction:
    """Parse one SASS instruction as printed by nvdisasm, cuobjdump or Nsight Compute.

    Accepted: an optional guard (``@P0``, ``@!UP1``), ``OPCODE.MOD.MOD`` and comma-separated
    operands; cuobjdump's ``/*0070*/`` address and ``/* 0x... */`` encoding comments and the
    trailing ``;``; scoreboard control as nvdisasm prints it (``&req={0,1}`` wait mask,
    ``&rd=0x1`` read barrier, ``&wr=0x0`` write barrier, ``?trans1``/``?WAIT4_END_GROUP``
    scheduling), or as a CuAssembler prefix ``[B01----:R2:W3:Y:S04]`` or a maxas prefix
    ``03:2:3:Y:4`` (hex wait mask); ``DEPBAR`` operands ``SB0``, ``{5,4}`` and ``{B0,B1}``.

    Raises
    ------
    SASSSyntaxError
        Empty text, a malformed guard or opcode, unbalanced brackets, or an unknown annotation.
    """
    if not isinstance(text, str):
        raise SASSSyntaxError(f"SASS must be a string, got {type(text).__name__}")
    body = _COMMENT.sub(" ", text).strip().rstrip(";").strip()
    if not body:
        raise sass_error(text, "no instruction text")
    body, control = split_control(text, body)
    guard, body = _guard(text, body.rstrip(";").strip())
    m = _OPCODE.match(body)
    if m is None:
        raise sass_error(text, "expected an upper-case opcode such as LDG.E.SYS")
    opcode = m.group(1)
    mods = tuple(x for x in m.group(2).split(".") if x)
    ops = _split_operands(text, body[m.end():].strip())
    dests, srcs = _registers(opcode, mods, ops, guard)
    waits = control.waits | _depbar_waits(text, opcode, ops)
    target, label, call = _transfer_target(opcode, ops)
    return Instruction(
        text=text.strip(),
        opcode=opcode,
        modifiers=mods,
        guard=guard,
        operands=ops,
        destinations=dests,
        sources=srcs,
        wait_barriers=waits,
        write_barrier=control.write_barrier,
        read_barrier=control.read_barrier,
        stall_cycles=control.stall_cycles,
        memory_space=_MEMORY_SPACE.get(opcode),
        branch_target=target,
        branch_label=label,
        call_target=call,
        reads_constant_bank=any(re.search(r"(?<![A-Za-z])c\[", op) for op in ops),
    )
