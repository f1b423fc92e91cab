"""The in-depth ops through the real worker script (bare ``python3 -I`` subprocess, JSON lines)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from compute.pog import Commitment, Opening, choose_openings, new_challenge, verify, worker_script
from compute.pog.host import (
    HostPolicy,
    check_cpu,
    check_disk,
    cpu_request,
    disk_read_request,
    disk_write_request,
)
from compute.pog.memory import (
    MemoryCommitment,
    MemoryOpening,
    MemoryPolicy,
    choose_memory_openings,
    judge_memory_timing,
    plan_memory,
    verify_memory,
)
from compute.pog.sustained import analyse_series, plan_sustained


@pytest.fixture
def worker(tmp_path: Path):
    script = tmp_path / "worker.py"
    script.write_text(worker_script()[0])
    proc = subprocess.Popen(
        [sys.executable, "-I", "-u", str(script), "--device", "cpu"],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def send(message: dict) -> None:
        proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()

    def read() -> tuple[float, dict]:
        line = proc.stdout.readline()
        return time.perf_counter(), json.loads(line)

    yield send, read
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


@pytest.mark.parametrize("slot", ["memory", "ram"])
def test_memory_round_through_the_worker(worker, slot) -> None:
    send, read = worker
    challenge = plan_memory(1.0, 100.0, 2, passes=4, rng=np.random.default_rng(2)).model_copy(
        update={"n": 256, "hash_rounds": 4}
    )
    send({"op": f"{slot}_build", "challenge": challenge.build_message()})
    assert read()[1]["ready"]["challenge_id"] == challenge.challenge_id
    started = time.perf_counter()
    send({"op": f"{slot}_commit", "request": challenge.start_message()})
    arrivals: list[list[float]] = [[], []]
    ops = []
    while True:
        at, line = read()
        ops.append(line["op"])
        if line["op"] == "memory_pass":
            arrivals[line["gpu"]].append(at)
        if line["op"] == f"{slot}_commit":
            break
    assert ops == ["memory_pass"] * 8 + [f"{slot}_commit"]
    commitment = MemoryCommitment.model_validate(line["commitment"])
    request = choose_memory_openings(challenge, 2)
    send({"op": f"{slot}_open", "request": request.model_dump()})
    opening = MemoryOpening.model_validate(read()[1]["opening"])
    assert verify_memory(challenge, commitment, request, opening).ok
    timing = judge_memory_timing(
        challenge, started, arrivals, MemoryPolicy(max_regen_rate=1e6, host_stream_gbs=0.0)
    )
    assert timing.ok, timing.reasons


@pytest.mark.slow
def test_sustained_scaling_and_probe_ops_through_the_worker(worker, tmp_path) -> None:
    send, read = worker
    plan = plan_sustained(1e-4, "fp32", duration_s=3, segment_s=1, m=16, rng=np.random.default_rng(1))
    sent = time.perf_counter()
    send({"op": "sustained", "segments": [c.model_dump() for c in plan.challenges()]})
    lines = [read() for _ in range(plan.segments + 1)]
    assert [line["op"] for _, line in lines] == ["segment"] * plan.segments + ["sustained"]
    report = analyse_series(sent, [at for at, _ in lines[:-1]], plan.flops_per_segment)
    assert report.first_tflops > 0
    challenge = plan.segment(1)
    request = choose_openings(challenge)
    send({"op": "sustained_open", "index": 1, "request": request.model_dump()})
    opening = Opening.model_validate(read()[1]["opening"])
    assert verify(challenge, Commitment.model_validate(lines[1][1]["commitment"]), request, opening).ok

    alone = new_challenge("fp32", 16, 64, 16, 1)
    send({"op": "commit_on", "device": 0, "challenge": alone.model_dump()})
    commitment = Commitment.model_validate(read()[1]["commitment"])
    request = choose_openings(alone)
    send({"op": "open", "request": request.model_dump()})
    assert verify(alone, commitment, request, Opening.model_validate(read()[1]["opening"])).ok

    write = {**disk_write_request(1 << 20), "path": str(tmp_path)}
    started = time.perf_counter()
    send({"op": "disk_write", "request": write})
    at, written = read()
    read_request = disk_read_request(256)
    read_started = time.perf_counter()
    send({"op": "disk_read", "request": read_request})
    read_at, back = read()
    slow_core = HostPolicy(max_core_gbs=1e-3)  # 1 MB is too small for the read-back bound on a real core
    elapsed = (at - started, read_at - read_started)
    check = check_disk(
        write, written["result"], elapsed[0], read_request, back["result"], elapsed[1], slow_core
    )
    assert check.ok and check.value == 0.05 * (1 << 20) / 1e9, check.reasons  # what a timely read proves
    assert not list(tmp_path.glob(".compute-probe-*"))  # the file is gone after the read-back
    cpu = cpu_request(2, 1)
    started = time.perf_counter()
    send({"op": "probe", "request": cpu})
    at, reply = read()
    assert check_cpu(cpu, reply["result"], at - started).ok
    send({"op": "memory_open", "request": {}})
    assert read()[1]["ok"] is False


class _Writes:
    """A worker's stdout that keeps each write apart (what one SSH packet would carry)."""

    def __init__(self) -> None:
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return len(text)

    def flush(self) -> None:
        pass


def test_a_memory_pass_leaves_the_worker_in_one_write_with_every_gpus_line() -> None:
    """The validator's timing process pays per SSH packet: a pass's lines (one per GPU, each with
    its own leaf) go out together, once the pass is done on every GPU, and in GPU order."""
    from io import BytesIO

    from compute.pog.worker_main import serve

    gpus, passes = 3, 4
    challenge = plan_memory(1.0, 100.0, gpus, passes=passes, rng=np.random.default_rng(5)).model_copy(
        update={"n": 128, "hash_rounds": 2}
    )
    requests = [
        {"op": "memory_build", "challenge": challenge.build_message()},
        {"op": "memory_commit", "request": challenge.start_message()},
        {"op": "exit"},
    ]
    out = _Writes()
    assert serve(BytesIO("".join(json.dumps(r) + "\n" for r in requests).encode()), out, "cpu") == 0
    pass_writes = [w for w in out.writes if '"memory_pass"' in w]
    assert len(pass_writes) == passes, out.writes
    for r, text in enumerate(pass_writes, 1):
        lines = [json.loads(line) for line in text.splitlines()]
        assert [(line["gpu"], line["pass"]) for line in lines] == [(g, r) for g in range(gpus)]
        assert len({line["leaf"] for line in lines}) == gpus
    commit = json.loads(out.writes[out.writes.index(pass_writes[-1]) + 1])
    leaves = commit["commitment"]["leaves"]
    assert [[json.loads(t.splitlines()[g])["leaf"] for t in pass_writes] for g in range(gpus)] == leaves
