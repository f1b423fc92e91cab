"""Run ``register.py`` commands as real processes and signal them at chosen moments.

Started once as ``python interrupt_driver.py``, it imports the CLI (two seconds of imports, paid
once) and then reads one JSON job per line on stdin: ``{"argv": [...], "signal": 2, "delay": 0.05}``.
For each it forks a child that runs ``compute.operator.main(argv)`` exactly as ``neurons/register.py``
does, sends the child ``signal`` ``delay`` seconds after the fork (none when ``signal`` is null, or
when the child already exited), waits for it and answers one JSON line: ``{"code", "signalled",
"elapsed", "stdout", "stderr"}``. The driver has one thread, so forking it is safe.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from compute.operator import main  # noqa: E402

_SIGNALS = {signal.SIGINT, signal.SIGTERM}


def _child(argv: list[str], out: str, err: str) -> None:
    """In the forked child, born with SIGINT and SIGTERM blocked (``_run``). A signal landing
    before ``main`` runs (the driver's own lines, slow under load) is answered as
    ``neurons/register.py`` answers one during its imports: "interrupted", exit 128 + signal,
    nothing started; from ``main`` on, the CLI's own handling is what is tested. The signals are
    unblocked only once the files are open and the handlers set, so one that comes earlier waits
    (CI: a SIGINT 8 ms after the fork, between the handler and the ``try``, left no line)."""
    stdout, stderr = open(out, "w"), open(err, "w")  # noqa: SIM115 - closed by os._exit's flush below

    def before_main(signum: int, _frame: object) -> None:
        stderr.write("interrupted\n")
        stderr.flush()
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, before_main)
    signal.signal(signal.SIGINT, before_main)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)  # a pending one is handled here
    signal.signal(signal.SIGINT, signal.default_int_handler)  # main's own Ctrl-C handling from here
    try:
        code = main(argv, stdout=stdout, stderr=stderr)
    except BaseException as exc:  # noqa: BLE001 - a traceback is a finding: report it
        import traceback

        stderr.write("TRACEBACK " + "".join(traceback.format_exception(exc)))
        code = 99
    stdout.flush()
    stderr.flush()
    os._exit(code)


def _run(job: dict, scratch: Path) -> dict:
    out, err = scratch / "out", scratch / "err"
    started = time.monotonic()
    signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    pid = os.fork()
    if pid == 0:
        _child(job["argv"], str(out), str(err))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)
    signalled, status = False, None
    if job.get("signal") is not None:
        deadline = started + float(job["delay"])
        while time.monotonic() < deadline:
            reaped, found = os.waitpid(pid, os.WNOHANG)
            if reaped:
                status = found
                break
            time.sleep(0.0005)
        else:
            os.kill(pid, int(job["signal"]))
            signalled = True
    if status is None:
        _, status = os.waitpid(pid, 0)
    return {
        "code": os.waitstatus_to_exitcode(status),
        "signalled": signalled,
        "elapsed": time.monotonic() - started,
        "stdout": out.read_text() if out.exists() else "",
        "stderr": err.read_text() if err.exists() else "",
    }


def main_loop() -> None:
    scratch = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="interrupt-driver-"))
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        print(json.dumps(_run(json.loads(line), scratch)), flush=True)


if __name__ == "__main__":
    main_loop()
