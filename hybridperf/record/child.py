"""Run one benchmark configuration once, for a profiler (ncu) to watch: python -m hybridperf.record.child SPEC."""
from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["child_spec", "main"]


def child_spec(kernel: str, bench: str, params: Mapping[str, float], device: int = 0) -> str:
    """The JSON argument of the child: descriptor (name or path), setup file, parameter values, device."""
    return json.dumps({"kernel": kernel, "bench": bench, "params": dict(params), "device": device}, sort_keys=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Compile, allocate and launch the configuration once; exit 0, or 1 with a one-line message."""
    from hybridperf.errors import HybridperfError
    from hybridperf.kernel import load_kernel
    from hybridperf.record.bench import load_bench
    from hybridperf.record.cupy_runner import CupyRunner
    from hybridperf.record.device import open_device
    from hybridperf.record.plan import PlannedRow

    args = list(sys.argv[1:] if argv is None else argv)
    try:
        spec: dict[str, Any] = json.loads(args[0])
        kernel = load_kernel(spec["kernel"])
        params = {k: float(v) for k, v in spec["params"].items()}
        # The row may come from a --space outside the descriptor's values: allow exactly its values.
        kernel = kernel.with_space({n: (params[n],) for n in kernel.config_names if n in params})
        bench = load_bench(kernel, spec["bench"])
        open_device(int(spec.get("device", 0)))
        launch = bench.resolve(kernel, params)
        row = PlannedRow(kernel=kernel.name, gpu="",
                         sizes=tuple((n, params[n]) for n in kernel.size_names if n in params),
                         config=tuple((n, params[n]) for n in kernel.config_names if n in params))
        CupyRunner(bench)(row, launch).time_ms()
    except (HybridperfError, KeyError, IndexError, ValueError) as exc:
        print(f"hybridperf.record.child: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
