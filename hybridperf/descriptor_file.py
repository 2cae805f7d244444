"""Reading kernel descriptor TOML (a file, or the text a model file keeps) into KernelDescriptors."""
from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

from hybridperf.descriptor import FORMAT_VERSION, KernelDescriptor, Param, check_space
from hybridperf.errors import DescriptorError, FormulaError
from hybridperf.formula import FUNCTION_NAMES, Formula, compile_formula
from hybridperf.inputs import read_input
from hybridperf.limits import MAX_TOML_BYTES
from hybridperf.profile import LAUNCH_KEYS, OPTIONAL_COUNTS, PROFILE_FIELDS, REQUIRED_COUNTS
from hybridperf.tomlfile import check_document, parse_toml

_FUNCTIONS_TEXT = ", ".join(sorted(FUNCTION_NAMES))  # named in the error of a name that shadows one

__all__ = ["parse_kernel_file", "parse_kernel_text", "read_toml_bytes"]

_TOP_KEYS = {"format_version", "name", "aliases", "matches", "description", "source", "sizes", "config", "space",
             "derived", "launch", "counts", "notes"}
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")
_PARAM_KEYS = {"default", "values", "min", "max", "integer", "description"}


def _num(path: str | Path, where: str, v: Any) -> float:
    if isinstance(v, bool):
        return float(v)
    try:
        ok = isinstance(v, (int, float)) and math.isfinite(float(v))
    except OverflowError:
        ok = False
    if not ok:
        got = f"the text {v[:30]!r} (write the number without quotes)" if isinstance(v, str) else str(v)[:30]
        raise DescriptorError(f"{path}: {where} must be a finite number, got {got}")
    return float(v)


def _integer(path: str | Path, section: str, name: str, spec: dict[str, Any], given: tuple[Any, ...]) -> bool:
    """A parameter's ``integer`` flag (default: true for sizes), checked against its default and values."""
    integer = spec.get("integer", section == "sizes")
    if not isinstance(integer, bool):
        raise DescriptorError(f"{path}: [{section}].{name}.integer must be true or false")
    fractional = [v for v in given if v is not None and v != round(v)]
    if integer and fractional:
        why = "sizes do" if section == "sizes" else "integer = true"
        raise DescriptorError(f"{path}: [{section}].{name} takes whole numbers ({why}), but its default or values "
                              f"hold {fractional[0]:.15g}; declare integer = false for a fractional parameter")
    return integer


def _params(path: str | Path, doc: dict[str, Any], section: str) -> tuple[Param, ...]:
    table = doc.get(section, {})
    if not isinstance(table, dict):
        raise DescriptorError(f"{path}: [{section}] must be a table of parameters")
    out = []
    for name, spec in table.items():
        if not name.isidentifier() or name in FUNCTION_NAMES:
            raise DescriptorError(f"{path}: [{section}] parameter name {name!r} must be an identifier that is not a "
                                  f"formula function ({_FUNCTIONS_TEXT}); rename it")
        if not isinstance(spec, dict):
            raise DescriptorError(f"{path}: [{section}].{name} must be a table like {{ default = 1 }}")
        unknown = set(spec) - _PARAM_KEYS
        if unknown:
            raise DescriptorError(f"{path}: [{section}].{name} has unknown key {sorted(unknown)[0]!r}; "
                                  f"allowed: {', '.join(sorted(_PARAM_KEYS))}")
        values = spec.get("values")
        if values is not None:
            if not isinstance(values, list) or not values:
                raise DescriptorError(f"{path}: [{section}].{name}.values must be a non-empty list")
            values = tuple(_num(path, f"[{section}].{name}.values", v) for v in values)
            twice = sorted(v for v, n in Counter(values).items() if n > 1)
            if twice:  # each configuration would be enumerated, ranked and measured as often
                raise DescriptorError(f"{path}: [{section}].{name}.values lists {twice[0]:.15g} more than once; "
                                      "list each value once")
        default = spec.get("default")
        default = None if default is None else _num(path, f"[{section}].{name}.default", default)
        if values is not None and default is not None and default not in values:
            raise DescriptorError(f"{path}: [{section}].{name}.default {default:g} is not among its values")
        integer = _integer(path, section, name, spec, (default, *(values or ())))
        out.append(Param(
            name=name, default=default, values=values, integer=integer,
            min=None if spec.get("min") is None else _num(path, f"[{section}].{name}.min", spec["min"]),
            max=None if spec.get("max") is None else _num(path, f"[{section}].{name}.max", spec["max"]),
            description=str(spec.get("description", "")),
        ))
    return tuple(out)


def _formulas(path: str | Path, doc: dict[str, Any],
              allowed: set[str]) -> tuple[dict[str, Formula], dict[str, Formula]]:
    """The [launch] and [counts] formulas; later formulas may use earlier results (launch first, then
    the required, then the optional counts)."""
    launch_t, counts_t = doc.get("launch", {}), doc.get("counts", {})
    for section, table, keys in (("launch", launch_t, LAUNCH_KEYS),
                                 ("counts", counts_t, REQUIRED_COUNTS + tuple(OPTIONAL_COUNTS))):
        if not isinstance(table, dict):
            raise DescriptorError(f"{path}: [{section}] must be a table of formulas")
        bad = set(table) - set(keys)
        if bad:
            raise DescriptorError(f"{path}: [{section}] has unknown formula name {sorted(bad)[0]!r}; "
                                  f"allowed: {', '.join(keys)}")
    missing = [f"launch.{k}" for k in LAUNCH_KEYS if k not in launch_t]
    missing += [f"counts.{k}" for k in REQUIRED_COUNTS if k not in counts_t]
    if missing:
        raise DescriptorError(f"{path}: missing formula {missing[0]}; see docs/kernel-descriptor-format.md")
    launch = {k: compile_formula(launch_t[k], where=f"{path} [launch].{k}", allowed=allowed) for k in LAUNCH_KEYS}
    # Each count may use the launch values and the counts before it, in the order they are computed (a count
    # naming itself or a later one compiled, then failed as "formula needs parameter 'comp_insts'").
    allowed = allowed | set(LAUNCH_KEYS)
    counts: dict[str, Formula] = {}
    order = REQUIRED_COUNTS + tuple(OPTIONAL_COUNTS)
    for k in order:
        if k in counts_t:
            try:
                counts[k] = compile_formula(counts_t[k], where=f"{path} [counts].{k}", allowed=allowed)
            except FormulaError:
                later = [c for c in order[order.index(k):] if re.search(rf"\b{c}\b", str(counts_t[k]))]
                if not later:
                    raise
                raise DescriptorError(f"{path}: [counts].{k} uses {later[0]}, a count computed "
                                      f"{'by this formula' if later[0] == k else 'after it'}; a count may use the "
                                      f"parameters, [derived] and [launch] values and the counts before it (in "
                                      f"the order {', '.join(order)})") from None
        allowed.add(k)
    return launch, counts


def _derived(path: str | Path, doc: dict[str, Any], params: set[str]) -> tuple[tuple[str, Formula], ...]:
    """The ``[derived]`` formulas, in file order: named intermediate quantities over the parameters and the
    derived quantities above them, usable by the launch and count formulas (not by ``[space]`` constraints,
    which the solver checks over parameters alone)."""
    table = doc.get("derived", {})
    if not isinstance(table, dict):
        raise DescriptorError(f"{path}: [derived] must be a table of named formulas")
    allowed = set(params)
    out = []
    for name, text in table.items():
        if not name.isidentifier() or name in params or name in PROFILE_FIELDS or name in FUNCTION_NAMES:
            raise DescriptorError(f"{path}: [derived] name {name!r} must be an identifier that is not a parameter, "
                                  f"launch key, count or formula function ({_FUNCTIONS_TEXT}); "
                                  "rename it")
        if not isinstance(text, str):
            raise DescriptorError(f"{path}: [derived].{name} must be a formula string")
        out.append((name, compile_formula(text, where=f"{path} [derived].{name}", allowed=allowed)))
        allowed.add(name)
    return tuple(out)


def _no_derived_in_constraints(path: str | Path, doc: dict[str, Any], derived: set[str]) -> None:
    """``[space]`` constraints are checked by the solver over parameters alone (search/space.py): a derived
    name there is refused with the fix."""
    space = doc.get("space", {})
    cons = space.get("constraints", []) if isinstance(space, dict) else []
    for i, c in enumerate(cons if isinstance(cons, list) else []):
        used = sorted(n for n in derived if isinstance(c, str) and re.search(rf"\b{re.escape(n)}\b", c))
        if used:
            raise DescriptorError(f"{path}: [space].constraints[{i}] uses the [derived] quantity {used[0]!r}; "
                                  "constraints take parameters only: write its formula out in the constraint")


def _constraints(path: str | Path, doc: dict[str, Any], allowed: set[str]) -> tuple[Formula, ...]:
    space = doc.get("space", {})
    if not isinstance(space, dict) or set(space) - {"constraints"}:
        raise DescriptorError(f"{path}: [space] takes only constraints = [\"...\"]")
    cons = space.get("constraints", [])
    if not isinstance(cons, list):
        raise DescriptorError(f"{path}: [space].constraints must be a list of formula strings")
    return tuple(compile_formula(c, where=f"{path} [space].constraints[{i}]", allowed=allowed)
                 for i, c in enumerate(cons))


def _strings(path: str | Path, doc: dict[str, Any], key: str, what: str) -> tuple[str, ...]:
    items = doc.get(key, [])
    if not isinstance(items, list) or not all(isinstance(a, str) and a for a in items):
        raise DescriptorError(f"{path}: {key} must be a list of {what}")
    return tuple(items)


def _name(where: str | Path, doc: dict[str, Any]) -> str:
    name = doc.get("name")
    if not isinstance(name, str) or not name:
        raise DescriptorError(f"{where}: missing name; add name = \"...\"")
    return check_name(name, where)


def check_name(name: str, where: str | Path) -> str:
    """``name`` if it may name a kernel (sweep rows carry it), else a DescriptorError saying what a name holds."""
    if not _NAME.fullmatch(name) or name.lower().endswith(".toml"):
        raise DescriptorError(f"{where}: name {name[:40]!r} must start with a letter or digit and hold only letters, "
                              "digits and - _ . + (sweep rows carry it; a path is not a name)")
    return name


def _build(raw: bytes, doc: dict[str, Any], where: str | Path, path: str) -> KernelDescriptor:
    check_document(doc, where, DescriptorError, "descriptor", FORMAT_VERSION, _TOP_KEYS)
    name = _name(where, doc)
    sizes, config = _params(where, doc, "sizes"), _params(where, doc, "config")
    dup = set(p.name for p in sizes) & set(p.name for p in config)
    if dup:
        raise DescriptorError(f"{where}: parameter {sorted(dup)[0]!r} is both a size and a config parameter")
    params = {p.name for p in sizes + config}
    derived = _derived(where, doc, params)
    launch, counts = _formulas(where, doc, params | {n for n, _ in derived})
    _no_derived_in_constraints(where, doc, {n for n, _ in derived})
    return check_space(KernelDescriptor(
        name=name, sizes=sizes, config=config, launch=launch, counts=counts, derived=derived,
        constraints=_constraints(where, doc, params), aliases=_strings(where, doc, "aliases", "names"),
        matches=_strings(where, doc, "matches", "glob patterns such as \"aiwc-*\""),
        description=str(doc.get("description", "")),
        source=str(doc.get("source", "")), path=path, sha256=hashlib.sha256(raw).hexdigest(),
        text=raw.decode("utf-8"),
    ), "of [config]")


def parse_kernel_file(path: str | Path, raw: bytes | None = None) -> KernelDescriptor:
    """The descriptor in a TOML file (a DescriptorError naming the file, the field and the fix if malformed);
    ``raw``: the file's bytes, when the caller has read them already."""
    path = Path(path)
    if raw is None:
        raw = read_toml_bytes(path)
    return _build(raw, parse_toml(raw, path, DescriptorError), path, str(path))


def read_toml_bytes(path: str | Path) -> bytes:
    """A descriptor file's bytes, read within the TOML size limit (a regular file only)."""
    return read_input(Path(path), error=DescriptorError, what="descriptor", max_bytes=MAX_TOML_BYTES,
                      decompress=False)


def parse_kernel_text(text: str, where: str) -> KernelDescriptor:
    """The descriptor in TOML text (e.g. the copy a model file keeps), checked like a file; ``where`` names
    it in errors. Formulas go through the same safe evaluator: nothing in the text is run as code."""
    raw = text.encode("utf-8")
    return _build(raw, parse_toml(raw, where, DescriptorError), where, "")
