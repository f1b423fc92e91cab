"""Host proofs run for real (threads, host RAM, a temp dir), checked by spot checks on the validator's
clock; each cheat (the miner's own core count, faked chains, RAM never allocated, disk never written,
other data) is caught or credited nothing."""

from __future__ import annotations

import base64
import hashlib
import math
import os
import time

import numpy as np
import pytest

from compute.pog.host import HostPolicy, check_cpu, check_disk, cpu_request, disk_read_request
from compute.pog.host.probe import CPU_CHECKPOINTS, DiskProbe, disk_block, probe_cpu
from compute.pog.memory import (
    MemoryCommitment,
    MemoryEngine,
    MemoryOpening,
    MemoryPolicy,
    choose_memory_openings,
    judge_memory_timing,
    plan_memory,
    proven_bytes,
    verify_memory,
)
from compute.pog.memory.kernel import product_np

RAM_POLICY = MemoryPolicy(max_regen_rate=1e9, host_stream_gbs=0.0, min_bandwidth_fraction=0.0)


def _timed(fn, *args):
    started = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - started


def test_cpu_cores_come_from_validator_timed_work_never_from_the_miner() -> None:
    request = cpu_request(4, 4)
    result, elapsed = _timed(probe_cpu, request)
    check = check_cpu(request, {**result, "usable": 1024}, elapsed)  # a self-reported count is ignored
    assert check.ok and check.rate > 0
    assert check.value == pytest.approx(min(4.0, check.rate / HostPolicy().reference_core_gbs))
    paced = check_cpu(request, result, elapsed * 3)  # holding the answer back only lowers the figure
    assert paced.value < check.value or paced.value == 4.0


def test_cpu_chains_run_one_after_another_are_credited_one_core_of_work() -> None:
    one = cpu_request(1, 4)
    _, single_s = _timed(probe_cpu, one)
    request = {**cpu_request(4, 4), "seed": one["seed"]}
    sequential = {"what": "cpu", "checkpoints": []}
    started = time.perf_counter()
    for k in range(4):  # the cheater's single core runs every chain in turn
        sequential["checkpoints"].append(probe_cpu({**request, "chains": k + 1})["checkpoints"][k])
    check = check_cpu(request, sequential, time.perf_counter() - started)
    assert check.ok and check.value < 4.0 * single_s / (time.perf_counter() - started) + 1.0


def test_cpu_chains_with_faked_segments_are_caught() -> None:
    request = cpu_request(2, 2)
    result, elapsed = _timed(probe_cpu, request)
    faked = [list(chain) for chain in result["checkpoints"]]
    for chain in faked:
        chain[1::2] = ["00" * 32] * (CPU_CHECKPOINTS // 2)  # half the segments never computed
    check = check_cpu(request, {"what": "cpu", "checkpoints": faked}, elapsed, rng=np.random.default_rng(0))
    assert not check.ok and check.value == 0.0 and "wrong digests" in check.reasons[0]


class NoFile(DiskProbe):
    """Computes the chain (it needs the root) but keeps no file: regenerates blocks on read-back."""

    def write(self, request):
        result = super().write(request)
        self.seed = bytes.fromhex(request["seed"])
        os.remove(self._target)
        return result

    def read(self, request):
        wanted = set(request["blocks"]) | {k - 1 for k in request["blocks"] if k > 0}
        blocks, leaf = {}, b""
        for k in range(max(wanted) + 1):  # the chain, one block after another
            block = disk_block(self.seed, k, leaf)
            leaf = hashlib.sha256(block).digest()
            if k in wanted:
                blocks[k] = block
        opened = [
            {
                "index": k,
                "data": base64.b64encode(blocks[k]).decode(),
                "path": [n.hex() for n in self._tree.path(k)],
            }
            for k in sorted(wanted)
        ]
        self._target = None
        return {"what": "disk", "blocks": opened}


class OtherData(DiskProbe):
    """Writes some other data of the right size (say, zeros): the blocks are not the seeded chain."""

    def read(self, request):
        result = super().read(request)
        for entry in result["blocks"]:
            entry["data"] = "A" * len(entry["data"])
        return result


def _chain_gbs(blocks: int = 512) -> float:
    """This machine's single-core speed at regenerating the disk chain (best of three)."""
    best = math.inf
    for _ in range(3):
        leaf, started = b"", time.perf_counter()
        for k in range(blocks):
            leaf = hashlib.sha256(disk_block(b"\x01" * 16, k, leaf)).digest()
        best = min(best, time.perf_counter() - started)
    return blocks * 4096 / best / 1e9


def _disk_round(probe: DiskProbe, path, mb: int = 32):
    write = {"seed": "cd" * 16, "bytes": mb << 20, "path": str(path)}
    written, write_s = _timed(probe.write, write)
    request = disk_read_request(written["bytes"] // 4096, rng=np.random.default_rng(1))
    back, read_s = _timed(probe.read, request)
    # The bound assumes a core twice as fast as the one running the test (production: the fastest
    # x86 core), so the regenerating cheater misses it on any machine while 32 MB leaves the honest
    # read-back from the page cache well inside it.
    policy = HostPolicy(max_core_gbs=2 * _chain_gbs())
    return check_disk(write, written, write_s, request, back, read_s, policy)


def test_disk_written_and_read_back_is_credited(tmp_path) -> None:
    check = _disk_round(DiskProbe(), tmp_path)
    assert check.ok and check.value == (32 << 20) / 1e9, check.reasons
    assert not list(tmp_path.iterdir())  # nothing left behind


def test_disk_never_written_is_caught_by_the_read_back_time(tmp_path) -> None:
    check = _disk_round(NoFile(), tmp_path)
    assert not check.ok and check.value == 0.0 and "regenerating the chain" in check.reasons[0]


def test_disk_holding_other_data_is_caught(tmp_path) -> None:
    check = _disk_round(OtherData(), tmp_path)
    assert not check.ok and check.value == 0.0


class NoRam(MemoryEngine):
    """Claims the RAM but never allocates it: regenerates the data on every pass."""

    def build(self, spec, gpu):
        return None

    def multiply(self, spec, gpu, a, x):
        return product_np(super().build(spec, gpu), x)


@pytest.mark.parametrize(("engine", "credited"), [(MemoryEngine, True), (NoRam, False)])
def test_host_ram_is_credited_only_when_resident(engine, credited) -> None:
    challenge = plan_memory(
        0.004, 1.0, 1, fraction=1.0, passes=8, policy=RAM_POLICY, rng=np.random.default_rng(4)
    )
    prover = engine("cpu")
    prover.prepare(challenge.build_message())
    arrivals: list[list[float]] = [[]]
    started = time.perf_counter()
    commitment = prover.commit(
        challenge.start_message(), lambda line: arrivals[0].append(time.perf_counter())
    )
    request = choose_memory_openings(challenge, 3)
    opening = MemoryOpening.model_validate(prover.open(request.model_dump()))
    maths = verify_memory(challenge, MemoryCommitment.model_validate(commitment), request, opening)
    timing = judge_memory_timing(challenge, started, arrivals, RAM_POLICY)
    assert proven_bytes(challenge, maths, timing) == [challenge.matrix_bytes if credited else 0], (
        timing.reasons
    )


@pytest.mark.parametrize(
    "request_",
    [
        {"seed": "zz", "chains": 1, "steps": 128},
        {"seed": "ab" * 16, "chains": 0, "steps": 128},
        {"seed": "ab" * 16, "chains": 1, "steps": 130},
    ],
)
def test_bad_cpu_requests_are_refused(request_) -> None:
    with pytest.raises(ValueError):
        probe_cpu(request_)


def test_checks_never_raise_on_garbage() -> None:
    request = cpu_request(1, 1)
    assert not check_cpu(request, None, 1.0).ok
    assert not check_cpu("junk", {}, 1.0).ok  # type: ignore[arg-type]
    assert not check_cpu(request, {"what": "cpu"}, 0.0).ok
    assert not check_disk(
        {"seed": "ab" * 16, "bytes": 4096}, {"bytes": 4096}, 1.0, {"blocks": [0]}, {}, 1.0
    ).ok
    assert not check_disk({}, None, float("nan"), {}, None, 1.0).ok
