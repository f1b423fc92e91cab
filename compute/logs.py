"""Logging setup for entry points: one line per event on the console, optional rotating files.

``configure_logging(debug, trace, logging_dir)`` is called once by ``neurons/*.py``; library
modules only ever call ``logging.getLogger(__name__)``. ``debug`` lowers this project's loggers
to DEBUG; ``trace`` also lowers the libraries' (bittensor, asyncssh, httpx, uvicorn).

The neurons pass ``info_to_stdout=True``: INFO and below go to stdout, WARNING and above to
stderr, so a supervisor that files the two streams apart (pm2's out and error logs, systemd's
priorities) files only real trouble as errors. Commands whose stdout is their answer (``--json``)
keep every line on stderr (the default).

Every line it writes is printable (:class:`PrintableFormatter`): a peer's text that reached a
message (a miner's refusal, a worker's error) shows its control characters as escapes and can
neither repaint a terminal nor forge a line; tracebacks keep their line breaks.

What it deliberately does not do: redact messages (callers never log keys or secrets), or ship
logs anywhere.
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
from pathlib import Path

from compute.peertext import printable

FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
_PROJECT_LOGGERS = ("compute", "neurons", "__main__")
_NOISY_LOGGERS = ("asyncssh", "httpx", "httpcore", "uvicorn.access", "bittensor", "docker", "urllib3")


class PrintableFormatter(logging.Formatter):
    """``logging.Formatter`` whose output holds printable characters only (newlines of tracebacks
    and stack dumps kept; a message's own newlines escaped, so one event stays one line)."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        return printable(super().formatMessage(record))

    def formatException(self, ei) -> str:  # noqa: ANN001, N802 - logging's signature
        return "\n".join(printable(line) for line in super().formatException(ei).split("\n"))

    def formatStack(self, stack_info: str) -> str:  # noqa: N802
        return "\n".join(printable(line) for line in super().formatStack(stack_info).split("\n"))


class _Below(logging.Filter):
    """Passes the records under ``level`` (the stdout half of a split console)."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < self.level


def _console(info_to_stdout: bool) -> list[logging.Handler]:
    if not info_to_stdout:
        return [logging.StreamHandler(sys.stderr)]
    quiet = logging.StreamHandler(sys.stdout)
    quiet.addFilter(_Below(logging.WARNING))
    loud = logging.StreamHandler(sys.stderr)
    loud.setLevel(logging.WARNING)
    return [quiet, loud]


def configure_logging(
    debug: bool = False,
    trace: bool = False,
    logging_dir: str | Path | None = None,
    name: str = "neuron",
    info_to_stdout: bool = False,
) -> None:
    """Install handlers on the root logger (idempotent: replaces handlers it installed before);
    ``info_to_stdout``: INFO and below on stdout, WARNING and above on stderr (else all on stderr)."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, "_compute_handler", False)]:
        root.removeHandler(handler)
    formatter = PrintableFormatter(FORMAT)
    handlers = _console(info_to_stdout)
    if logging_dir is not None:
        directory = Path(logging_dir).expanduser()
        directory.mkdir(parents=True, exist_ok=True)
        handlers.append(
            logging.handlers.RotatingFileHandler(
                directory / f"{name}.log", maxBytes=20_000_000, backupCount=5
            )
        )
    for handler in handlers:
        handler.setFormatter(formatter)
        handler._compute_handler = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    root.setLevel(logging.DEBUG if trace else logging.INFO)
    for project in _PROJECT_LOGGERS:
        logging.getLogger(project).setLevel(logging.DEBUG if (debug or trace) else logging.INFO)
    for noisy in _NOISY_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.DEBUG if trace else logging.WARNING)


__all__ = ["FORMAT", "PrintableFormatter", "configure_logging"]
