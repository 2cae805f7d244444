"""Parse one SASS instruction: opcode, operands, predicates, scoreboard barriers, memory space."""
from __future__ import annotations

import re
from dataclasses import dataclass

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

_COMMENT = re.compile(r"/\*.*?\*/")
_CUASM = re.compile(r"^\[B([0-5-]{6}):R([0-5-]):W([0-5-]):([Y-]):S(\d{1,2})\]\s*")
_MAXAS = re.compile(r"^([0-9a-fA-F]{2}|--):([0-5-]):([0-5-]):([Y-]):([0-9a-fA-F])\s+")
_REQ = re.compile(r"&req=\{([^}]*)\}")
_BARRIER_SET = re.compile(r"&(rd|wr|wr_early)=0x([0-9a-fA-F]+)")
_SCHED = re.compile(r"\?([A-Za-z0-9_]+)")
_GUARD = re.compile(r"^@(!?)(U?P[T0-6])\s+")
_OPCODE = re.compile(r"^([A-Z][A-Z0-9_]*)((?:\.[A-Za-z0-9_]+)*)(?=\s|$)")
_REGISTER = re.compile(r"(?<![A-Za-z0-9_.])(UPR|PR|UR(?:Z|\d{1,2})|R(?:Z|\d{1,3})|UP(?:T|[0-6])|P(?:T|[0-6]))"
                       r"((?:\.[A-Za-z0-9_]+)*)")
_NUMBER = re.compile(r"^-?(0x[0-9a-fA-F]+|\d+)$")
_LABEL = re.compile(r"^`?\(?\s*(\.?[A-Za-z_$][\w.$]*)\s*\)?$")
_WAIT_STALL = re.compile(r"^(?:WAIT(\d+)(?:_END_GROUP)?|trans(\d+))$")


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


def _fail(text: str, why: str) -> SASSSyntaxError:
    return SASSSyntaxError(f"cannot parse SASS {text!r}: {why}")


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
                raise _fail(text, f"unbalanced {ch!r}")
            depth -= 1
        if ch == "," and depth == 0:
            ops.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if stack:
        raise _fail(text, f"missing {stack[-1]!r}")
    last = "".join(cur).strip()
    if last or ops:
        ops.append(last)
    if any(not op for op in ops):
        raise _fail(text, "empty operand")
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


def _widths(opcode: str, mods: tuple[str, ...], n_ops: int, n_dest: int) -> tuple[int, list[int]]:
    """(destination width, per-source-operand widths) in 32-bit registers."""
    size = 4 if "128" in mods else 2 if ("64" in mods or any(m in _TYPES_64 for m in mods)) else 1
    if "X4" in mods or "x4" in mods:
        size = 4
    elif "X2" in mods or "x2" in mods:
        size = max(size, 2)
    n_src = n_ops - n_dest
    dest, src = 1, [1] * n_src
    if opcode in _FP64 or (opcode == "DMMA"):
        dest, src = 2, [2] * n_src
    elif opcode in _TENSOR:
        dest = 4
        src = [2] * n_src
        if n_src:
            src[-1] = 4
    elif opcode in _CONVERT:
        types = [m for m in mods if re.fullmatch(r"[FSU](8|16|32|64)", m)]
        dest = 2 if types and types[0] in _TYPES_64 else 1
        src_w = 2 if len(types) > 1 and types[1] in _TYPES_64 else (dest if len(types) == 1 and
                                                                   opcode == "FRND" else 1)
        src = [src_w] * n_src
    elif "WIDE" in mods:
        dest = 2
        if opcode.endswith("IMAD") and n_src:
            src[-1] = 2
    elif opcode == "CS2R":
        dest = 1 if "32" in mods else 2
    elif opcode in _MEMORY_SPACE:
        if opcode in _STORES:
            src = [size] * n_src
        else:
            dest = size
            if opcode.startswith("ATOM") or opcode == "SUATOM":
                src = [size] * n_src
    elif "64" in mods:
        dest, src = 2, [2] * n_src
    return dest, src


def _parse_control(text: str, body: str) -> tuple[str, frozenset[int], int | None, int | None, int | None]:
    waits: set[int] = set()
    wr: int | None = None
    rd: int | None = None
    stall: int | None = None
    m = _CUASM.match(body)
    if m:
        waits.update(int(c) for c in m.group(1) if c != "-")
        rd = None if m.group(2) == "-" else int(m.group(2))
        wr = None if m.group(3) == "-" else int(m.group(3))
        stall = int(m.group(5))
        body = body[m.end():]
    else:
        m = _MAXAS.match(body)
        if m:
            if m.group(1) != "--":
                mask = int(m.group(1), 16)
                if mask >= 64:
                    raise _fail(text, f"wait mask 0x{mask:x} names a barrier above B5")
                waits.update(i for i in range(6) if mask >> i & 1)
            rd = None if m.group(2) == "-" else int(m.group(2))
            wr = None if m.group(3) == "-" else int(m.group(3))
            stall = int(m.group(5), 16)
            body = body[m.end():]
    for m in _REQ.finditer(body):
        for tok in m.group(1).split(","):
            tok = tok.strip()
            if not tok.isdigit() or int(tok) > 5:
                raise _fail(text, f"&req={{{m.group(1)}}} must list barrier indices 0-5")
            waits.add(int(tok))
    for m in _BARRIER_SET.finditer(body):
        idx = int(m.group(2), 16)
        if idx > 5:
            raise _fail(text, f"&{m.group(1)}=0x{idx:x} is not a barrier index 0-5")
        if m.group(1) == "rd":
            rd = idx
        else:
            wr = idx
    for m in _SCHED.finditer(body):
        w = _WAIT_STALL.match(m.group(1))
        if w:
            stall = int(w.group(1) or w.group(2))
    body = _SCHED.sub(" ", _BARRIER_SET.sub(" ", _REQ.sub(" ", body)))
    if "&" in body or "?" in body:
        raise _fail(text, "unknown control annotation (accepted: &req={..} &rd=0x. &wr=0x. ?name)")
    return body.strip(), frozenset(waits), wr, rd, stall


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
        raise _fail(text, "no instruction text")
    body, waits, wr, rd, stall = _parse_control(text, body)
    body = body.rstrip(";").strip()
    guard: Predicate | None = None
    if body.startswith("@"):
        m = _GUARD.match(body)
        if m is None:
            raise _fail(text, "guard must look like @P0, @!P1, @PT or @UP0")
        if m.group(2) not in ("PT", "UPT"):
            guard = Predicate(m.group(2), negated=bool(m.group(1)))
        body = body[m.end():]
    m = _OPCODE.match(body)
    if m is None:
        raise _fail(text, "expected an upper-case opcode such as LDG.E.SYS")
    opcode = m.group(1)
    mods = tuple(x for x in m.group(2).split(".") if x)
    ops = _split_operands(text, body[m.end():].strip())
    if opcode in _NO_DEST:
        n_dest = 0
    elif opcode in _TWO_DEST:
        n_dest = min(2, len(ops))
    else:
        n_dest = min(1, len(ops))
        while n_dest < len(ops) and re.fullmatch(r"U?P(?:T|[0-6])", ops[n_dest]):
            n_dest += 1  # carry-out predicates: IADD3 R4, P0, P1, R2, R3, RZ
    dest_w, src_w = _widths(opcode, mods, len(ops), n_dest)
    dests: set[str] = set()
    srcs: set[str] = set()
    for i, op in enumerate(ops):
        if i < n_dest:
            if "[" in op:  # e.g. ATOMS.POPC.INC R0, [URZ] - a destination is never a memory ref
                srcs.update(_operand_registers(op, 1))
            else:
                dests.update(_operand_registers(op, dest_w))
        else:
            srcs.update(_operand_registers(op, src_w[i - n_dest]))
    if guard is not None:
        srcs.add(guard.register)
    if opcode == "DEPBAR":
        for op in ops:
            for tok in re.findall(r"\bS?B(\d+)\b", op) + (
                    re.findall(r"\d+", op) if op.startswith("{") else []):
                if int(tok) > 5:
                    raise _fail(text, f"DEPBAR barrier {tok} is not an index 0-5")
                waits = waits | {int(tok)}
    target: int | None = None
    label: str | None = None
    call: str | None = None
    if opcode in ("BRA", "BRX", "JMP", "JMX", "CALL") and ops:
        last = ops[-1]
        num = _NUMBER.match(last)
        if num:
            value = int(num.group(1), 0)
            if opcode == "CALL":
                call = hex(value)
            else:
                target = value
        else:
            lab = _LABEL.match(last)
            if lab and not _REGISTER.fullmatch(last):
                if opcode == "CALL":
                    call = lab.group(1)
                else:
                    label = lab.group(1)
    return Instruction(
        text=text.strip(),
        opcode=opcode,
        modifiers=mods,
        guard=guard,
        operands=ops,
        destinations=frozenset(dests),
        sources=frozenset(srcs),
        wait_barriers=waits,
        write_barrier=wr,
        read_barrier=rd,
        stall_cycles=stall,
        memory_space=_MEMORY_SPACE.get(opcode),
        branch_target=target,
        branch_label=label,
        call_target=call,
        reads_constant_bank=any(re.search(r"(?<![A-Za-z])c\[", op) for op in ops),
    )
