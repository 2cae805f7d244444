"""Finding kernel descriptors by name or path: registered ones, the user's search path, then the shipped ones."""
from __future__ import annotations

import fnmatch
import functools
import hashlib
import os
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path

from hybridperf.descriptor import KernelDescriptor, Param
from hybridperf.descriptor_file import parse_kernel_file, parse_kernel_text, read_toml_bytes
from hybridperf.errors import DescriptorError, HybridperfError, UnknownKernelError
from hybridperf.registry import REGISTERED, registration_scope
from hybridperf.tomlfile import load_folder, load_search_path, search_path
from hybridperf.userconfig import config_kernel_path

__all__ = [
    "KERNEL_PATH_ENV",
    "KernelDescriptor",
    "Param",
    "available_kernels",
    "family_kernel",
    "kernel_key",
    "kernel_names",
    "kernel_search_path",
    "list_kernels",
    "load_kernel",
    "parse_kernel_text",
    "register_kernel",
    "registered_kernel",
    "registration_scope",
    "resolve_kernels",
    "unregister_kernel",
]

# Folders or descriptor files searched for kernel names, separated like PATH (':' on Unix).
KERNEL_PATH_ENV = "HYBRIDPERF_KERNEL_PATH"
_SHIPPED_DIR = Path(str(resources.files("hybridperf") / "kernels"))
# Descriptors registered in this process (register_kernel; the command line's --kernel PATH), by name.
_REGISTERED: dict[str, KernelDescriptor] = REGISTERED


@functools.cache
def _shipped() -> tuple[KernelDescriptor, ...]:
    return load_folder(_SHIPPED_DIR, parse_kernel_file, _names, DescriptorError)


def _names(kernel: KernelDescriptor) -> set[str]:
    """Every name a descriptor answers to: its name, file stem and aliases."""
    return {kernel.name, *([Path(kernel.path).stem] if kernel.path else []), *kernel.aliases}


_PARSED: dict[tuple[str, str], KernelDescriptor] = {}  # (path, sha256 of its bytes) -> descriptor
_MAX_PARSED = 256


def _parse(path: str | Path) -> KernelDescriptor:
    """A descriptor file, parsed once per content (formulas compile once; an edited file is read anew)."""
    raw = read_toml_bytes(path)
    key = (str(path), hashlib.sha256(raw).hexdigest())
    if key not in _PARSED:
        if len(_PARSED) >= _MAX_PARSED:
            _PARSED.clear()
        _PARSED[key] = parse_kernel_file(path, raw)
    return _PARSED[key]


def kernel_search_path() -> list[Path]:
    """Where kernel names are looked up before the shipped descriptors: the entries of
    ``$HYBRIDPERF_KERNEL_PATH`` (separated by ``os.pathsep``), then the configuration file's ``kernel_path``
    (:mod:`hybridperf.userconfig`). Each entry is a folder of ``*.toml`` descriptors or one descriptor file."""
    return search_path(KERNEL_PATH_ENV, config_kernel_path())


def _search_path_kernels() -> list[KernelDescriptor]:
    return load_search_path(kernel_search_path(), _parse, _names, DescriptorError, lambda entry: UnknownKernelError(
        f"kernel search path entry {str(entry)!r} (from ${KERNEL_PATH_ENV} or the configuration file's "
        "kernel_path) does not exist; fix or remove it"))


def available_kernels() -> list[tuple[str, KernelDescriptor]]:
    """Every descriptor a name can reach, in lookup order, with where it comes from (``registered``,
    ``search path``, ``shipped``); a name taken by an earlier one hides later ones of that name."""
    tiers = [("registered", list(reversed(_REGISTERED.values()))), ("search path", _search_path_kernels()),
             ("shipped", list(_shipped()))]
    out, seen = [], set()
    for origin, kernels in tiers:
        for k in kernels:
            if k.name not in seen:
                seen.add(k.name)
                out.append((origin, k))
    return out


def list_kernels() -> list[KernelDescriptor]:
    """Every shipped kernel descriptor."""
    return list(_shipped())


def kernel_names() -> list[str]:
    """Names of the descriptors a name can reach: registered, on the search path, shipped."""
    return [k.name for _, k in available_kernels()]


def family_kernel(name: str) -> KernelDescriptor | None:
    """The family descriptor (``matches`` globs) a kernel name belongs to, if it is no descriptor's own name
    or alias: such names are kernels in their own right that share one descriptor (e.g. ``aiwc-*``)."""
    kernels = [k for _, k in available_kernels()]
    if any(name in _names(k) for k in kernels):
        return None
    return next((k for k in kernels if any(fnmatch.fnmatchcase(name, p) for p in k.matches)), None)


def register_kernel(kernel: str | Path | KernelDescriptor) -> KernelDescriptor:
    """Make a descriptor (a file, or one built in memory) answer to its name and aliases in this process,
    before the search path and the shipped ones, e.g. so that sweeps naming it can be trained on.
    Registering another descriptor of the same name replaces the first."""
    desc = kernel if isinstance(kernel, KernelDescriptor) else _parse(kernel)
    _REGISTERED.pop(desc.name, None)
    _REGISTERED[desc.name] = desc
    return desc


def unregister_kernel(name: str) -> None:
    """Forget a descriptor :func:`register_kernel` registered (nothing if none of that name)."""
    _REGISTERED.pop(name, None)


def registered_kernel(name: str) -> KernelDescriptor | None:
    """The descriptor registered under ``name`` in this process, if any."""
    return _REGISTERED.get(name)


def _is_path(text: str) -> bool:
    return text.endswith(".toml") or os.sep in text or (os.altsep is not None and os.altsep in text) \
        or Path(text).is_file()


def _known(text: str, known: Mapping[str, KernelDescriptor]) -> KernelDescriptor | None:
    """The copy ``known`` keeps under ``text``, or the one copy answering to that name: a copy kept under its
    file's path (rows that named the kernel by path) is found by its name too."""
    if text in known:
        return known[text]
    named = [k for k in known.values() if text in _names(k)]
    return named[0] if len({k.sha256 for k in named}) == 1 else None


def load_kernel(name_or_path: str | Path | KernelDescriptor,
                known: Mapping[str, KernelDescriptor] | None = None) -> KernelDescriptor:
    """A descriptor by TOML path, or by name or alias: registered ones first, then ``known`` (e.g. the
    copies a model keeps, by name), then the search path (:func:`kernel_search_path`), then the shipped
    ones; family descriptors (``matches``) last."""
    if isinstance(name_or_path, KernelDescriptor):
        return name_or_path
    text = str(name_or_path)
    if isinstance(name_or_path, Path) or _is_path(text):
        p = Path(text)
        if not p.is_file():
            raise UnknownKernelError(f"kernel descriptor file {text!r} does not exist; check the path")
        return _parse(p)
    kept = _known(text, known) if known and text not in _REGISTERED else None
    if kept is not None:
        return kept
    kernels = [k for _, k in available_kernels()]
    for k in kernels:
        if text in _names(k):
            return k
    for k in kernels:  # family descriptors: one descriptor for many counter-described kernels
        if any(fnmatch.fnmatchcase(text, pattern) for pattern in k.matches):
            return k
    raise UnknownKernelError(
        f"unknown kernel {text!r}{_near(text, {n for k in kernels for n in _names(k)})}; run 'hybridperf kernels' "
        f"for the names, pass a descriptor path (--kernel ./{text}.toml), or put its folder on ${KERNEL_PATH_ENV}"
    )


def _near(text: str, names: set[str]) -> str:
    """' (did you mean 'matvec'?)' for the name closest to ``text`` (case ignored), or ''."""
    from hybridperf.names import closest_name

    # 0.8: a typo or a case slip (matvc, MatVec), not another kernel of a family (neusight-add is no neusight-bmm)
    near = closest_name(text, names, cutoff=0.8)
    return f" (did you mean {near!r}?)" if near else ""


def kernel_key(desc: KernelDescriptor) -> str:
    """The name sweep rows carry for a descriptor: its name where that name finds this same descriptor
    (shipped, registered, on the search path, or kept in memory), else its file's path."""
    if not desc.path:
        return desc.name
    try:
        found = load_kernel(desc.name)
    except HybridperfError:
        return desc.path
    return desc.name if found.sha256 == desc.sha256 else desc.path


def resolve_kernels(names: Iterable[str], given: Mapping[str, KernelDescriptor] | None = None
                    ) -> dict[str, KernelDescriptor]:
    """The descriptor of each kernel name rows carry: from ``given`` (e.g. the copies a model keeps) first,
    else :func:`load_kernel`."""
    given = given or {}
    return {str(n): given[str(n)] if str(n) in given else load_kernel(str(n)) for n in names}
