"""Progress of a validator round, so a 45 s (or 45 min) round is never silent.

On a terminal: a rich progress bar (miners done / total, verified, failed, elapsed). Anywhere else
(pm2, a pipe, a log file): one log line every ``every_s`` seconds (:meth:`RoundProgress.heartbeat`)
and one when the round ends,
never a bar's control characters. People-facing only: it counts results, it decides nothing.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

log = logging.getLogger(__name__)


class RoundProgress:
    """Counts finished miners of one round; ``advance(ok)`` per result, ``close()`` at the end."""

    def __init__(
        self,
        round_id: int,
        total: int,
        *,
        every_s: float = 10.0,
        stream: TextIO | None = None,
        clock=time.monotonic,
    ) -> None:
        self.round_id, self.total, self.every_s, self._clock = round_id, total, every_s, clock
        self.done = self.verified = 0
        self.started = clock()
        stream = stream if stream is not None else sys.stderr
        self._bar: Progress | None = None
        self._task = None
        if stream.isatty() and total > 0:
            self._bar = Progress(
                TextColumn(f"round {round_id}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("miners · {task.fields[verified]} verified · {task.fields[failed]} failed"),
                TimeElapsedColumn(),
                console=Console(file=stream),
                transient=True,
            )
            self._task = self._bar.add_task("round", total=total, verified=0, failed=0)
            self._bar.start()

    @property
    def failed(self) -> int:
        return self.done - self.verified

    def line(self) -> str:
        elapsed = self._clock() - self.started
        return (
            f"round={self.round_id} progress {self.done}/{self.total} miners done "
            f"({self.verified} verified, {self.failed} failed) after {elapsed:.0f}s"
        )

    def advance(self, ok: bool) -> None:
        self.done += 1
        self.verified += int(ok)
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, advance=1, verified=self.verified, failed=self.failed)

    async def heartbeat(self) -> None:
        """Off a terminal, log :meth:`line` every ``every_s`` seconds until cancelled."""
        if self._bar is not None:
            return  # the bar refreshes itself
        while True:
            await asyncio.sleep(self.every_s)
            log.info("%s", self.line())

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        log.info("%s", self.line())
