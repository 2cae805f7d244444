"""The command line with a slow disk: fsync writes a marker file then sleeps, so a test can kill a write midway.

Usage: ``python -m tests.hostile.slow_write MARKER hybridperf-arguments...``.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path


def main() -> int:
    marker = Path(sys.argv[1])
    real_fsync = os.fsync

    def slow_fsync(fd: int) -> None:
        marker.write_text("writing\n")
        time.sleep(60)
        real_fsync(fd)

    os.fsync = slow_fsync
    from hybridperf.cli import main as cli

    return cli(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
