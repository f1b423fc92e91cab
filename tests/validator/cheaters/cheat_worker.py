"""A cheating PoG worker, run in a lease in place of python3 by tests/validator (test code only).

Speaks the bootstrap honestly (length line, source bytes, sha256 echo), loads the genuine worker
source without running its main, patches one thing according to MODE, and serves:

partial   computes only the first quarter of C's rows (the rest are zeros)
bf16      rounds C to bfloat16 (a lower-precision shortcut)
fp16acc   fp16 challenges: adds each 16 products in fp16 and promotes every block to fp32 (an MMA with
          an fp16 accumulator; twice the fp32-accumulate rate on RTX 5090 / L40)
replay    answers with the product of a stale, precomputed key (correct tree, wrong numbers)
forged    commits random roots at once and computes only after the clock stopped
memskip   memory proof: runs pass 1, then skips the passes (replays pass 1's vector without reading A)
memregen  memory proof: never allocates A, regenerates it on every pass (right answers, too slow)
throttle  honest, but each sustained segment takes longer than the one before (a throttling GPU)
spike     honest, but its first timed commit stalls 2 s (a scheduler or network spike)
garbage   answers every request with a line that is not JSON
deepnest  answers info with JSON nested 20000 deep (RecursionError in json.loads)
hugeint   answers info with memory_bytes 1e999 (Infinity: OverflowError in int())
wrongtype answers info with a device list of strings
silent    answers info, then never answers again
hostiletext answers every request {"ok": false} with an error full of terminal control codes and
          rich markup (the worker's words must reach the validator's table and log printable)
partialsecond honest in the first timed GEMM run, computes a quarter of the rows in the next ones
fakefar   honest, but answers every ping 0.3 s late (pretends to be far away to stretch an allowance)
device_S_T_PLAY an emulated device at DEVICE_TFLOPS in its GEMM rounds, S x that in its sustained
          segments, throttling to T x S after its first segments; PLAY ``honest`` shows the throttling,
          ``pace`` paces every segment to the throttled speed from the first (every answer honest,
          each commit padded to its work at the emulated speed: the device, not this CPU, sets the time)
"""

from __future__ import annotations

import dataclasses
import hashlib
import secrets
import sys
import time
import types

import numpy as np

sys.modules["torch"] = None  # keep the cheater fast: no torch import (numpy GEMM)


def main(mode: str) -> None:
    stdin = sys.stdin.buffer
    size = int(stdin.readline(32))
    source = stdin.read(size)
    sys.stdout.write(hashlib.sha256(source).hexdigest() + "\n")
    sys.stdout.flush()
    module = types.ModuleType("pog_worker_lib")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    ns = module.__dict__
    exec(compile(source, "pog_worker", "exec"), ns)
    if mode in ("garbage", "silent", *MALFORMED_INFO):
        return _broken(stdin, mode)
    if mode == "fakefar":
        honest_handle = ns["_handle"]

        def handle(engine_box, device, message):
            if isinstance(message, dict) and message.get("op") == "ping":
                time.sleep(0.3)  # only the round-trip probes look far; the timed answers come at once
            return honest_handle(engine_box, device, message)

        ns["_handle"] = handle
        return ns["serve"](stdin, sys.stdout, "cpu")
    if mode.startswith("device_"):
        return _emulated_device(ns, stdin, mode)
    original = ns["product_cpu"]
    if mode in ("memskip", "memregen", "throttle", "spike"):
        return _depth_cheat(ns, stdin, mode)
    if mode == "partial":

        def product(spec, gpu, threads, use_torch, *_buffers, **_reuse):
            quarter = original(dataclasses.replace(spec, m=max(1, spec.m // 4)), gpu, threads, use_torch)
            out = np.zeros((spec.m, spec.p), dtype=np.float32)
            out[: quarter.shape[0]] = quarter
            return out
    elif mode == "bf16":

        def product(spec, gpu, threads, use_torch, *_buffers, **_reuse):
            bits = original(spec, gpu, threads, use_torch).view(np.uint32)
            return ((bits + np.uint32(0x8000)) & np.uint32(0xFFFF0000)).view(np.float32)
    elif mode == "fp16acc":

        def product(spec, gpu, threads, use_torch, *_buffers, **_reuse):
            if spec.precision != "fp16":
                return original(spec, gpu, threads, use_torch)
            return _fp16_accumulated(ns, spec, gpu)
    elif mode == "replay":

        def product(spec, gpu, threads, use_torch, *_buffers, **_reuse):
            return original(dataclasses.replace(spec, key="00" * 16), gpu, threads, use_torch)
    elif mode == "partialsecond":  # honest in the first timed run, a quarter of the rows after it
        engine_cls, honest_commit = ns["ProverEngine"], ns["ProverEngine"].commit
        commits = {"n": 0}

        def commit(self, challenge, keep_previous=False):
            commits["n"] += 1
            return honest_commit(self, challenge, keep_previous)

        def product(spec, gpu, threads, use_torch, *_buffers, **_reuse):
            if commits["n"] < 2:
                return original(spec, gpu, threads, use_torch)
            quarter = original(dataclasses.replace(spec, m=max(1, spec.m // 4)), gpu, threads, use_torch)
            out = np.zeros((spec.m, spec.p), dtype=np.float32)
            out[: quarter.shape[0]] = quarter
            return out

        engine_cls.commit = commit
    elif mode == "forged":
        engine_cls = ns["ProverEngine"]
        honest_commit = engine_cls.commit

        def commit(self, challenge, keep_previous=False):
            self._pending = challenge
            return {
                "challenge_id": challenge["challenge_id"],
                "roots": [secrets.token_hex(32) for _ in range(int(challenge["gpu_count"]))],
            }

        def open_(self, request, _open=engine_cls.open):
            honest_commit(self, self._pending)  # the work starts only now, after the clock stopped
            return _open(self, request)

        engine_cls.commit, engine_cls.open = commit, open_
        product = original
    else:
        raise SystemExit(f"unknown mode {mode}")
    ns["product_cpu"] = product
    ns["serve"](stdin, sys.stdout, "cpu")


def _fp16_accumulated(ns: dict, spec, gpu: int, block: int = 16) -> np.ndarray:
    """C with every ``block`` products summed exactly, rounded once to fp16, then added in fp32."""
    (a_rs, a_cs), (b_rs, b_cs) = ns["_seeds"](spec, gpu)
    index_values, mix_block_np = ns["index_values"], ns["mix_block_np"]
    rows_a, cols_b = index_values(a_rs, 0, spec.m), index_values(b_cs, 0, spec.p)
    out = np.zeros((spec.m, spec.p), dtype=np.float32)
    for t0 in range(0, spec.n, block):
        count = min(block, spec.n - t0)
        a = mix_block_np(rows_a, index_values(a_cs, t0, count), 11).astype(np.float64)
        b = mix_block_np(index_values(b_rs, t0, count), cols_b, 11).astype(np.float64)
        out += (a @ b).astype(np.float16).astype(np.float32)  # exact sum of 16 products, one fp16 rounding
    return out


def _depth_cheat(ns: dict, stdin, mode: str) -> None:
    if mode == "memskip":
        engine_cls, honest = ns["MemoryEngine"], ns["MemoryEngine"].multiply
        calls = {"n": 0}

        def multiply(self, spec, gpu, a, x):
            calls["n"] += 1
            if calls["n"] == 1:
                calls["first"] = honest(self, spec, gpu, a, x)
            return calls["first"]  # every later pass replays pass 1 without reading A

        engine_cls.multiply = multiply
    elif mode == "memregen":
        engine_cls, build = ns["MemoryEngine"], ns["MemoryEngine"].build
        engine_cls.build = lambda self, spec, gpu: None
        engine_cls.multiply = lambda self, spec, gpu, a, x: ns["product_np"](build(self, spec, gpu), x)
    elif mode == "spike":
        engine_cls, honest = ns["ProverEngine"], ns["ProverEngine"].commit
        calls = {"n": 0}

        def commit(self, challenge, keep_previous=False):
            calls["n"] += 1
            time.sleep(2.0 if calls["n"] == 1 else 0.0)
            return honest(self, challenge, keep_previous)

        engine_cls.commit = commit
    else:
        engine_cls, honest = ns["ProverEngine"], ns["ProverEngine"].commit
        calls = {"n": 0}

        def commit(self, challenge, keep_previous=False):
            calls["n"] += 1
            time.sleep(0.15 * max(0, calls["n"] - 5))  # the 4 GEMM runs and the first segment run at speed
            return honest(self, challenge, keep_previous)

        engine_cls.commit = commit
    ns["serve"](stdin, sys.stdout, "cpu")


DEVICE_TFLOPS = 1e-4  # far below this CPU: the padding, not the machine's load, sets every duration


def _emulated_device(ns: dict, stdin, mode: str) -> None:
    """``device_S_T_PLAY``: GEMM commits take their work at DEVICE_TFLOPS, sustained segments at S x
    that, and the segments after the first two of a run at T x S (``honest``) or every segment at
    T x S (``pace``)."""
    _, s, throttle, play = mode.split("_")
    speed, throttle = float(s) * DEVICE_TFLOPS, float(throttle)
    engine_cls, honest = ns["ProverEngine"], ns["ProverEngine"].commit
    runner_cls, honest_run = ns["SustainedRunner"], ns["SustainedRunner"].run
    segment = {"n": -1}  # index of the segment in the current sustained run; -1: a GEMM round

    def run(self, segments, emit=None):
        segment["n"] = 0
        try:
            return honest_run(self, segments, emit)
        finally:
            segment["n"] = -1

    def commit(self, challenge, keep_previous=False):
        started = time.perf_counter()
        out = honest(self, challenge, keep_previous)
        spec = ns["parse_challenge"](challenge)
        work = 2.0 * spec.m * spec.n * spec.p * spec.gpu_count
        tflops = DEVICE_TFLOPS
        if segment["n"] >= 0:
            hot = play == "pace" or segment["n"] >= 2
            tflops = speed * (throttle if hot else 1.0)
            segment["n"] += 1
        time.sleep(max(0.0, work / (tflops * 1e12) - (time.perf_counter() - started)))
        return out

    engine_cls.commit = commit
    runner_cls.run = run
    ns["serve"](stdin, sys.stdout, "cpu")


MALFORMED_INFO = {
    "deepnest": '{"ok":true,"op":"info","devices":' + "[" * 20_000 + "]" * 20_000 + "}\n",
    "hugeint": '{"ok":true,"op":"info","devices":[{"index":0,"name":"x","memory_bytes":1e999}]}\n',
    "wrongtype": '{"ok":true,"op":"info","devices":["gpu0","gpu1"]}\n',
    "hostiletext": '{"ok":false,"error":"[/] \\u001b[2J\\u001b]0;pwned\\u0007\\r[bold]ok\\u202e\\u2028x"}\n',
}


def _broken(stdin, mode: str) -> None:
    while line := stdin.readline():
        if mode == "garbage":
            sys.stdout.write("ceci n'est pas du JSON\n")
        elif b'"ping"' in line:  # the round-trip probe is answered: the cheat is in what follows
            sys.stdout.write('{"ok":true,"op":"ping"}\n')
        elif mode in MALFORMED_INFO:
            sys.stdout.write(MALFORMED_INFO[mode])
        elif b'"info"' in line:
            sys.stdout.write(
                '{"ok":true,"op":"info","devices":[{"index":0,"name":"cpu","memory_bytes":1,"uuid":""}]}\n'
            )
        else:
            time.sleep(3600)
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1])
