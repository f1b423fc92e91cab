"""Main loop of the PoG worker: JSON lines on stdin/stdout (info -> [warmup] -> commit -> open -> exit).

One request per line, one response per line; C stays in memory between commit and open. Every
failure answers ``{"ok": false, "error": ...}`` and the loop keeps serving; only ``exit`` or end of
input stops it. Input lines are bounded (``MAX_REQUEST_BYTES``) before parsing. Stdlib only (the
engine brings numpy/torch); embedded verbatim in the worker script, never imported by the
validator for trust decisions.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading

from .depth_engine import DEPTH_OPS, handle_depth_op
from .engine import ProverEngine

MAX_REQUEST_BYTES = 1 << 20


def _handle(engine_box: dict, device: str, message: object) -> dict:
    if not isinstance(message, dict) or not isinstance(message.get("op"), str):
        raise ValueError('each request must be a JSON object with a string "op"')
    op = message["op"]
    if op == "ping":  # a round trip the validator times (no engine needed: answered at once)
        return {"ok": True, "op": "ping"}
    if op not in ("info", "warmup", "commit", "open", *DEPTH_OPS):
        raise ValueError(
            f"unknown op {op!r}: expected ping, info, warmup, commit, open, {', '.join(DEPTH_OPS)} or exit"
        )
    if "engine" not in engine_box:
        engine_box["engine"] = ProverEngine(device)
    engine = engine_box["engine"]
    if op in DEPTH_OPS:  # memory, sustained, scaling and host probes (compute.pog.depth_engine)
        return handle_depth_op(engine_box, engine, message, engine_box.get("emit", lambda line: None))
    if op == "info":
        return {"ok": True, "op": "info", **engine.info()}
    if op == "warmup":  # the validator sends the coming challenge's shape before starting its clock
        return {"ok": True, "op": "warmup", **engine.warm_up(message.get("challenge"))}
    if op == "commit":
        return {"ok": True, "op": "commit", "commitment": engine.commit(message.get("challenge"))}
    return {"ok": True, "op": "open", "opening": engine.open(message.get("request"))}


def serve(stdin, stdout, device: str = "auto") -> int:
    """Serve requests from binary ``stdin`` to text ``stdout`` until exit or end of input."""
    engine_box: dict = {}
    lock = threading.Lock()

    def emit(lines: dict | list[dict]) -> None:
        """Intermediate lines (a segment; a memory pass's line per GPU), written at once: a list
        in one write, so they travel in one SSH packet."""
        batch = lines if isinstance(lines, list) else [lines]
        with lock:
            stdout.write("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in batch))
            stdout.flush()

    engine_box["emit"] = emit
    while True:
        line = stdin.readline(MAX_REQUEST_BYTES + 1)
        if not line:
            return 0
        if len(line) > MAX_REQUEST_BYTES:
            while line and not line.endswith(b"\n"):
                line = stdin.readline(MAX_REQUEST_BYTES + 1)
            response = {"ok": False, "error": f"request larger than {MAX_REQUEST_BYTES} bytes"}
        elif not line.strip():
            continue
        else:
            try:
                message = json.loads(line)
                if isinstance(message, dict) and message.get("op") == "exit":
                    stdout.write(json.dumps({"ok": True, "op": "exit"}) + "\n")
                    stdout.flush()
                    return 0
                response = _handle(engine_box, device, message)
            except Exception as exc:  # the request boundary: report and keep serving
                response = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        stdout.write(json.dumps(response, separators=(",", ":")) + "\n")
        stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Proof-of-GPU worker (JSON lines on stdin/stdout)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    args = parser.parse_args(argv)
    return serve(sys.stdin.buffer, sys.stdout, args.device)
