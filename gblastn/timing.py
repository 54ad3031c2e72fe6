"""Wall time per search stage, summed over the threads that ran it, and when each stage was
first and last busy (for -stage_times and the benchmarks: where a search's time goes, and
which stages overlap)."""

import threading
import time
from contextlib import contextmanager

STAGES = ("start-up", "gpu set-up", "database load", "gpu copy", "query setup", "scan",
          "ungapped", "gapped", "subject letters", "traceback", "output")


class StageTimes:
    def __init__(self):
        self.lock = threading.Lock()
        self.seconds = dict.fromkeys(STAGES, 0.0)
        self.spans: dict = {}  # stage -> [first start, last end], perf_counter seconds
        self.origin = time.perf_counter()
        self.report_wanted = False  # -stage_times: print report() when the search ends
        self.untimed_threads: set = set()  # idents of threads whose stages are not counted

    @contextmanager
    def untimed(self):
        """The calling thread's stages are not counted meanwhile (a warm-up beside a search)."""
        ident = threading.get_ident()
        self.untimed_threads.add(ident)
        try:
            yield
        finally:
            self.untimed_threads.discard(ident)

    @contextmanager
    def stage(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - start, start)

    def add(self, name: str, seconds: float, start: float | None = None) -> None:
        if threading.get_ident() in self.untimed_threads:
            return
        start = time.perf_counter() - seconds if start is None else start
        with self.lock:
            self.seconds[name] = self.seconds.get(name, 0.0) + seconds
            span = self.spans.setdefault(name, [start, start + seconds])
            span[0] = min(span[0], start)
            span[1] = max(span[1], start + seconds)

    def report(self) -> str:
        total = sum(self.seconds.values())
        parts = [f"{name} {secs:.2f}s" for name, secs in self.seconds.items() if secs > 0]
        origin = min([self.origin] + [span[0] for span in self.spans.values()])
        spans = [f"{name} {span[0] - origin:.2f}-{span[1] - origin:.2f}s"
                 for name, span in self.spans.items()]
        return (f"stage times (summed over threads, {total:.2f}s): " + ", ".join(parts) +
                "; busy between: " + ", ".join(spans))


# one per process: a search run is one process
TIMES = StageTimes()
