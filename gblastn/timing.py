"""Wall time per search stage, summed over the threads that ran it (for -stage_times and
the benchmarks: where a search's time goes)."""

import threading
import time
from contextlib import contextmanager

STAGES = ("start-up", "database load", "query setup", "scan", "ungapped", "gapped",
          "subject letters", "traceback", "output")


class StageTimes:
    def __init__(self):
        self.lock = threading.Lock()
        self.seconds = dict.fromkeys(STAGES, 0.0)

    @contextmanager
    def stage(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - start)

    def add(self, name: str, seconds: float) -> None:
        with self.lock:
            self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def report(self) -> str:
        total = sum(self.seconds.values())
        parts = [f"{name} {secs:.2f}s" for name, secs in self.seconds.items() if secs > 0]
        return f"stage times (summed over threads, {total:.2f}s): " + ", ".join(parts)


# one per process: a search run is one process
TIMES = StageTimes()
