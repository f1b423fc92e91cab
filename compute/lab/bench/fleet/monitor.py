"""What the fleet benchmark watches in the validator's process while the round runs.

- ``LoopLag``: a task that asks to wake every ``interval`` and records how late it woke -- the delay
  any timestamp the validator takes on its event loop (the commit clock, memory pass arrivals) can
  carry.
- ``StackSampler``: a thread that samples every thread's Python stack at ``interval`` and files each
  busy sample under a stage by the innermost frame it recognises (SSH, JSON and wire models, HTTP
  and signatures, verification, SQLite store, chain, scoring); idle threads (waiting in the
  selector, a queue or a lock) are not counted. Stage CPU = the process's CPU x the stage's share
  of busy samples: a profile, not an exact account.
- ``GcPauses``: how long each garbage collection stopped the interpreter.
- ``SpoolWatch``: a thread that sums the timing process's spool directory (the big lines on their way
  to the pool: tmpfs memory that no process's RSS shows) every ``interval``; its peak and file count.
- ``ControlLoop``: an idle event loop in its own process, measured the same way: the lag the rest of
  the machine causes, to tell apart from the validator's own.
- ``percentiles``: p50 / p99 / max of a list of seconds, in milliseconds.

The instruments cost CPU in the validator's process (the loop-lag timer wakes the loop 200 times a
second, the sampler walks every stack 100 times a second: together about 0.035 s of CPU per wall
second here), which a longer round would otherwise file as the validator's. Each reports its own
(``cpu_s``): the threads their thread time, the loop-lag timer the CPU of the control's identical
timer in an otherwise idle process over the same wall (``ControlLoop.stop``).
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable

# innermost-frame file fragments -> stage (first match from the innermost frame outward wins)
STAGES: tuple[tuple[str, str], ...] = (
    ("/asyncssh/", "ssh"),
    ("/json/", "json+wire models"),
    ("/pydantic", "json+wire models"),
    ("compute/pog/wire", "json+wire models"),
    ("compute/validator/session/worker_reply", "json+wire models"),
    ("compute/pog/memory/", "verify memory"),
    ("compute/pog/host/", "verify host probes"),
    ("compute/pog/", "verify gemm (Merkle, rows)"),
    ("/httpx/", "http+signatures"),
    ("/httpcore/", "http+signatures"),
    ("/h11/", "http+signatures"),
    ("compute/transport/", "http+signatures"),
    ("/bittensor", "http+signatures"),
    ("compute/store/", "sqlite store"),
    ("/sqlite3/", "sqlite store"),
    ("compute/chain/", "chain"),
    ("compute/scoring/", "scoring"),
    ("compute/validator/session/", "ssh"),
    ("/asyncio/selector_events", "sockets (asyncio)"),
    ("/multiprocessing/", "pool hand-off (pickle, pipes)"),
    ("/concurrent/futures/", "pool hand-off (pickle, pipes)"),
)
OTHER = "other (asyncio, round logic)"
# innermost frames of a thread that waits: the selector, a queue, a lock, a pipe (pool threads)
IDLE = {
    "select",
    "poll",
    "epoll",
    "wait",
    "get",
    "sleep",
    "acquire",
    "_wait_for_tstate_lock",
    "readline",
    "_worker",
    "_recv",
    "_recv_bytes",
    "_send",  # the pool's feeder thread blocked writing to a full pipe
}
# the validator's own frames that block in a socket: the reader of the timing process's answers
# (a compute frame, so not idle by the rule above; it filed every wait of that thread under "ssh")
IDLE_OWN = {"_recv_exactly"}


class LoopLag:
    """Lateness of the event loop's timers, in seconds (``samples``)."""

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.samples: list[float] = []
        self._task: asyncio.Task | None = None

    async def _run(self) -> None:
        while True:
            due = time.monotonic() + self.interval
            await asyncio.sleep(self.interval)
            self.samples.append(max(0.0, time.monotonic() - due))

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="fleet-loop-lag")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


def _where(frame) -> str:
    code = frame.f_code
    return f"{code.co_filename.rsplit('/', 1)[-1]}:{code.co_name}"


def _stage(frame) -> tuple[str, str] | None:
    """(stage, the frame that named it) of a thread's stack; None when the thread is idle."""
    name = frame.f_code.co_name
    if name in IDLE_OWN or (name in IDLE and "compute" not in frame.f_code.co_filename):
        return None
    innermost = frame
    while frame is not None:
        name = frame.f_code.co_filename.replace("\\", "/")
        for fragment, stage in STAGES:
            if fragment in name:
                return stage, _where(frame)
        frame = frame.f_back
    return OTHER, _where(innermost)


class StackSampler:
    """Samples every thread but itself at ``interval`` seconds (see the module docstring)."""

    def __init__(self, interval: float = 0.01) -> None:
        self.interval = interval
        self.counts: Counter[str] = Counter()
        self.frames: Counter[str] = Counter()  # "stage | file:function" of every busy sample
        self.samples = 0
        self.cpu_s = 0.0  # this thread's own CPU: the instrument's, not the validator's
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fleet-sampler", daemon=True)

    def _run(self) -> None:
        try:
            self._sample()
        finally:
            self.cpu_s = time.thread_time()

    def _sample(self) -> None:
        me = threading.get_ident()
        while not self._stop.wait(self.interval):
            self.samples += 1
            for ident, frame in sys._current_frames().items():
                if ident != me:
                    found = _stage(frame)
                    if found is not None:
                        self.counts[found[0]] += 1
                        self.frames[f"{found[0]} | {found[1]}"] += 1

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def top_frames(self, count: int = 12) -> dict[str, float]:
        """The busiest (stage | frame) pairs, as shares of the busy samples."""
        busy = sum(self.frames.values())
        return {name: round(n / busy, 3) for name, n in self.frames.most_common(count)} if busy else {}

    def shares(self) -> dict[str, float]:
        busy = sum(self.counts.values())
        return {stage: count / busy for stage, count in self.counts.most_common()} if busy else {}


class GcPauses:
    """Durations of the interpreter's garbage collections (each one stops every Python thread)."""

    def __init__(self) -> None:
        self.pauses: list[float] = []
        self._started = 0.0

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.pauses.append(time.perf_counter() - self._started)

    def start(self) -> None:
        gc.callbacks.append(self._callback)

    def stop(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)


class SpoolWatch:
    """Peak bytes and files at once in a spool directory, and how many files it ever saw."""

    def __init__(self, directory: Callable[[], str | None], interval: float = 0.05) -> None:
        self.directory, self.interval = directory, interval
        self.peak_bytes = 0
        self.peak_files = 0
        self.seen: set[str] = set()
        self.cpu_s = 0.0  # this thread's own CPU
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fleet-spool", daemon=True)

    def _run(self) -> None:
        try:
            self._watch()
        finally:
            self.cpu_s = time.thread_time()

    def _watch(self) -> None:
        while not self._stop.wait(self.interval):
            path = self.directory()
            if path is None:
                continue
            size, files = 0, 0
            try:
                with os.scandir(path) as entries:
                    for entry in entries:
                        try:
                            size += entry.stat().st_size
                        except FileNotFoundError:  # verified and deleted meanwhile
                            continue
                        files += 1
                        self.seen.add(entry.name)
            except FileNotFoundError:
                continue
            self.peak_bytes, self.peak_files = max(self.peak_bytes, size), max(self.peak_files, files)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


async def _idle_loop_lag() -> None:
    """The control: an event loop that does nothing but measure its lag, until stdin closes."""
    lag = LoopLag()
    cpu0 = time.process_time()
    lag.start()
    await asyncio.to_thread(sys.stdin.read)
    await lag.stop()
    figures = percentiles(lag.samples)
    # what the timer cost this idle process (less the thread that waits on stdin): the same timer
    # costs the validator's loop as much over the same wall
    figures["cpu_s"] = time.process_time() - cpu0
    sys.stdout.write(json.dumps(figures) + "\n")


class ControlLoop:
    """A child process whose idle event loop measures lag beside the validator's, at the same
    priority: what the machine's other load does to any loop, as opposed to the validator's own work.
    ``stop`` also gives its CPU (``cpu_s``): what the loop-lag timer alone costs over that wall."""

    def __init__(self) -> None:
        code = "import asyncio; from compute.lab.bench.fleet.monitor import _idle_loop_lag as f; asyncio.run(f())"
        self._child = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def stop(self) -> dict:
        assert self._child.stdin is not None and self._child.stdout is not None  # both are PIPEs
        self._child.stdin.close()
        line = self._child.stdout.readline()
        self._child.wait(30)
        return json.loads(line) if line else {}


def percentiles(seconds: list[float]) -> dict[str, float]:
    """p50, p99 and max in milliseconds (zeros for an empty list)."""
    if not seconds:
        return {"p50": 0.0, "p99": 0.0, "max": 0.0, "n": 0}
    ordered = sorted(seconds)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e3, 3)

    return {"p50": at(0.5), "p99": at(0.99), "max": round(ordered[-1] * 1e3, 3), "n": len(ordered)}
