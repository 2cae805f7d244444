"""A :class:`hybridperf.progress.Reporter` that records what the library reports, for tests."""
from __future__ import annotations

import threading
from typing import Any


class Recorder:
    """Every task started: description, total, amount advanced, and whether it stopped."""

    def __init__(self) -> None:
        self.tasks: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def start(self, description: str, total: float | None) -> int:
        with self._lock:
            self.tasks.append({"description": description, "total": total, "done": 0.0, "stopped": False})
            return len(self.tasks) - 1

    def advance(self, task_id: int, amount: float) -> None:
        with self._lock:
            self.tasks[task_id]["done"] += amount

    def stop(self, task_id: int) -> None:
        self.tasks[task_id]["stopped"] = True

    def named(self, prefix: str) -> list[dict[str, Any]]:
        return [t for t in self.tasks if t["description"].startswith(prefix)]
