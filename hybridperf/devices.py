"""Device names as nvidia-smi, CUDA, OpenCL and data sets print them, resolved to GPU specs (one resolver)."""
from __future__ import annotations

import re
from dataclasses import dataclass

from hybridperf.errors import HybridperfError, UnknownGPUError
from hybridperf.hardware import GPUSpec, device_table, load_gpu, normalize_name

__all__ = ["DeviceMatch", "match_device", "resolve_device"]

_VENDOR = re.compile(r"^(nvidia|amd|ati|intel)\s+", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class DeviceMatch:
    """What a device name is: ``spec`` (None where no shipped or user spec fits), ``stem`` (the name its
    rows carry: the spec's, else a stem for importing its rows without a spec) and, without a spec,
    ``reason`` (why, and the fix). ``listed``: the name is in the device table (data/device_names.toml)."""

    name: str
    stem: str
    spec: GPUSpec | None
    reason: str = ""
    listed: bool = False

    def require(self) -> GPUSpec:
        """The spec, or an UnknownGPUError with the reason and the fix."""
        if self.spec is None:
            raise UnknownGPUError(f"device {self.name!r}: {self.reason}")
        return self.spec


def _fallback_stem(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", _VENDOR.sub("", name.strip()).lower()).strip("-")


def match_device(name: str) -> DeviceMatch:
    """The GPU spec a device name is.

    The device table first (exact printed names, a spec or a refusal with its reason), then the specs'
    own names and aliases (on the GPU search path, then shipped), with and without a vendor prefix
    (``NVIDIA``, ``AMD``). A name that nvidia-smi's table cut short (ending in ``...``) is refused.
    """
    text = str(name).strip()
    if not text:
        return DeviceMatch(name=text, stem="", spec=None, reason="no device name recorded; pass gpu=<spec name>")
    if text.endswith("..."):
        return DeviceMatch(name=text, stem="", spec=None, listed=True,
                           reason="nvidia-smi's table cut the name short; take the full one with "
                                  "nvidia-smi --query-gpu=name --format=csv")
    entry = device_table().get(normalize_name(text))
    if entry is not None:
        if "gpu" in entry:
            spec = load_gpu(entry["gpu"])
            return DeviceMatch(name=text, stem=spec.key, spec=spec, listed=True)
        return DeviceMatch(name=text, stem=entry.get("stem") or _fallback_stem(text), spec=None,
                           reason=entry["refuse"], listed=True)
    for candidate in (text, _VENDOR.sub("", text)):
        try:
            spec = load_gpu(candidate)
        except HybridperfError:
            continue
        return DeviceMatch(name=text, stem=spec.key, spec=spec)
    stem = _fallback_stem(text)
    return DeviceMatch(name=text, stem=stem, spec=None,
                       reason=f"no GPU spec matches (run 'hybridperf gpus'); pass gpu=<spec name> if it is one of "
                              f"them, write a spec (docs/gpu-spec-format.md), or import its rows without one: "
                              f"known_gpus={stem}")


def resolve_device(name: str) -> GPUSpec:
    """The GPU spec of a device name (:func:`match_device`), or an UnknownGPUError with the reason and fix."""
    return match_device(name).require()
