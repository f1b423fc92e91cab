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


def _child(argv: list[str], out: str, err: str) -> None:
    """In the forked child. A signal landing before ``main`` runs (the driver's own lines, slow under
    load) is answered as ``neurons/register.py`` answers one during its imports: exit 128 + signal,
    nothing started; from ``main`` on, the CLI's own handling is what is tested."""
    signal.signal(signal.SIGTERM, lambda *_: os._exit(128 + signal.SIGTERM))
    try:
        stdout, stderr = open(out, "w"), open(err, "w")  # noqa: SIM115 - closed by os._exit's flush below
    except KeyboardInterrupt:
        os._exit(128 + signal.SIGINT)
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
    pid = os.fork()
    if pid == 0:
        _child(job["argv"], str(out), str(err))
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
