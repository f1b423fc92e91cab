"""Logging setup for entry points: one line per event on stderr, optional rotating files.

``configure_logging(debug, trace, logging_dir)`` is called once by ``neurons/*.py``; library
modules only ever call ``logging.getLogger(__name__)``. ``debug`` lowers this project's loggers
to DEBUG; ``trace`` also lowers the libraries' (bittensor, asyncssh, httpx, uvicorn).

Every line it writes is printable (:class:`PrintableFormatter`): a peer's text that reached a
message (a miner's refusal, a worker's error) shows its control characters as escapes and can
neither repaint a terminal nor forge a line; tracebacks keep their line breaks.

What it deliberately does not do: redact messages (callers never log keys or secrets), or ship
logs anywhere.
"""

from __future__ import annotations

import logging
import logging.handlers
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


def configure_logging(
    debug: bool = False, trace: bool = False, logging_dir: str | Path | None = None, name: str = "neuron"
) -> None:
    """Install handlers on the root logger (idempotent: replaces handlers it installed before)."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, "_compute_handler", False)]:
        root.removeHandler(handler)
    formatter = PrintableFormatter(FORMAT)
    handlers: list[logging.Handler] = [logging.StreamHandler()]
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
