"""Host proofs run for real (threads, host RAM, a temp dir), checked by spot checks on the validator's
clock; each cheat (the miner's own core count, faked chains, RAM never allocated, disk never written,
other data) is caught or credited nothing."""

from __future__ import annotations

import base64
import hashlib
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from compute.pog.host import (
    HostPolicy,
    check_cpu,
    check_disk,
    cpu_request,
    disk_read_request,
    disk_write_request,
    ram_challenge,
)
from compute.pog.host.check import DISK_PROVEN_FRACTION
from compute.pog.host.probe import (
    CPU_CHECKPOINTS,
    PROBE_VERSION,
    DiskProbe,
    block_opening,
    disk_block,
    disk_parent,
    probe_cpu,
)
from compute.pog.memory import (
    MemoryCommitment,
    MemoryEngine,
    MemoryOpening,
    choose_memory_openings,
    judge_memory_timing,
    proven_bytes,
    verify_memory,
)
from compute.pog.memory.cpu_kernel import elements_cpu
from compute.pog.memory.kernel import product_np, round_keys
from compute.scoring.holistic import load_holistic_config
from compute.validator.params import DepthParams


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
    sequential = {"what": "cpu", "version": PROBE_VERSION, "checkpoints": []}
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
    check = check_cpu(request, {**result, "checkpoints": faked}, elapsed, rng=np.random.default_rng(0))
    assert not check.ok and check.value == 0.0 and "wrong digests" in check.reasons[0]


def _regenerate(seed: bytes, wanted: list[int], kept: dict[int, bytes]) -> dict[int, bytes]:
    """Blocks ``wanted`` rebuilt from the ``kept`` ones: the cone of missing parents, lowest first."""
    missing, stack = set(), list(wanted)
    while stack:
        k = stack.pop()
        if k in kept or k in missing:
            continue
        missing.add(k)
        stack.extend(j for j in (k - 1, disk_parent(seed, k)) if j is not None and j >= 0)
    blocks = dict(kept)
    for k in sorted(missing):  # parents have lower indices
        parent = disk_parent(seed, k)
        blocks[k] = disk_block(
            seed, k, blocks[k - 1] if k else b"", b"" if parent is None else blocks[parent]
        )
    return blocks


class KeptBlocks(DiskProbe):
    """Keeps its Merkle tree (the leaves: the whole v2 shortcut) and only every ``every``-th block
    (0: none), deletes the file, and rebuilds the asked blocks from what it kept on read-back."""

    every = 0

    def write(self, request):
        result = super().write(request)
        self.seed = bytes.fromhex(request["seed"])
        with open(self._target, "rb") as handle:
            data = handle.read()
        keep = range(0, len(data) // 4096, self.every) if self.every else ()
        self.kept = {k: data[k * 4096 : (k + 1) * 4096] for k in keep}
        os.remove(self._target)
        return result

    def read(self, request):
        wanted = block_opening(self.seed, request["blocks"])
        blocks = _regenerate(self.seed, wanted, self.kept)
        opened = [
            {
                "index": k,
                "data": base64.b64encode(blocks[k]).decode(),
                "path": [n.hex() for n in self._tree.path(k)],
            }
            for k in wanted
        ]
        self._target = None
        return {"what": "disk", "version": PROBE_VERSION, "blocks": opened}


class LeavesOnly(KeptBlocks):
    every = 0


class EveryFourth(KeptBlocks):
    every = 4


class EverySixteenth(KeptBlocks):
    every = 16


class OtherData(DiskProbe):
    """Writes some other data of the right size (say, zeros): the blocks are not the seeded chain."""

    def read(self, request):
        result = super().read(request)
        for entry in result["blocks"]:
            entry["data"] = "A" * len(entry["data"])
        return result


def _squeeze_gbs(blocks: int = 2048) -> float:
    """This machine's single-core speed at the least work per regenerated block: one 4 KiB squeeze."""
    best = math.inf
    for _ in range(3):
        started = time.perf_counter()
        for k in range(blocks):
            hashlib.shake_256(k.to_bytes(8, "little")).digest(4096)
        best = min(best, time.perf_counter() - started)
    return blocks * 4096 / best / 1e9


def _disk_round(probe: DiskProbe, path, mb: int = 32):
    write = {**disk_write_request(mb << 20), "path": str(path)}
    written, write_s = _timed(probe.write, write)
    request = disk_read_request(written["bytes"] // 4096, rng=np.random.default_rng(1))
    back, read_s = _timed(probe.read, request)
    # The bound assumes a core twice as fast as the one running the test (production: the fastest
    # x86 core), so a regenerating cheater misses it on any machine while 32 MB leaves the honest
    # read-back from the page cache well inside it.
    policy = HostPolicy(max_core_gbs=2 * _squeeze_gbs())
    return check_disk(write, written, write_s, request, back, read_s, policy)


def test_disk_written_and_read_back_is_credited_what_it_proves(tmp_path) -> None:
    check = _disk_round(DiskProbe(), tmp_path)
    assert check.ok and check.value == DISK_PROVEN_FRACTION * (32 << 20) / 1e9, check.reasons
    assert not list(tmp_path.iterdir())  # nothing left behind


@pytest.mark.parametrize("cheat", [LeavesOnly, EverySixteenth], ids=["LeavesOnly", "EverySixteenth"])
def test_disk_kept_as_leaves_or_sparse_blocks_is_caught_by_the_read_back_time(tmp_path, cheat) -> None:
    """Version 2 linked block k to the LEAF of block k - 1, so the Merkle tree alone (0.8 %
    of the data, 0 bytes on disk) rebuilt any block at once and 0.537 GB were credited. Now a block
    needs the full previous block and a random earlier one: the leaves rebuild nothing, and keeping
    every 16th block leaves a cone of ~40 % of the chain to regenerate: too slow, credited 0."""
    check = _disk_round(cheat(), tmp_path)
    assert not check.ok and check.value == 0.0 and "regenerating the chain" in check.reasons[0]


def test_disk_kept_as_every_fourth_block_is_credited_less_than_it_keeps(tmp_path) -> None:
    """A quarter of the blocks answers in time (its cone is ~0.5 % of the chain), so it passes; the
    credit is what a timely read proves, 1/20 of the bytes written: below the quarter it keeps."""
    check = _disk_round(EveryFourth(), tmp_path)
    assert check.ok and check.value <= (32 << 20) / 4 / 1e9


def test_disk_holding_other_data_is_caught(tmp_path) -> None:
    check = _disk_round(OtherData(), tmp_path)
    assert not check.ok and check.value == 0.0


def test_an_old_worker_is_refused_by_name(tmp_path) -> None:
    """Disk format version 3 is not version 2: a request or a reply of another version is refused."""
    with pytest.raises(ValueError, match="host probe version 2 is not this worker's 3"):
        DiskProbe().write({**disk_write_request(1 << 16), "version": 2, "path": str(tmp_path)})
    write = {**disk_write_request(1 << 16), "path": str(tmp_path)}
    written = DiskProbe().write(write)
    old = {key: value for key, value in written.items() if key != "version"}
    check = check_disk(write, old, 1.0, {"blocks": [0]}, {"blocks": []}, 0.001)
    assert not check.ok and "host probe version None" in check.reasons[0]
    cpu = cpu_request(1, 1)
    assert "version" in check_cpu(cpu, {"what": "cpu", "checkpoints": []}, 1.0).reasons[0]


class NoRam(MemoryEngine):
    """Claims the RAM but never allocates it: regenerates A on every pass with every core and the
    fastest kernel there is (``cpu_kernel``, numba), as a profit-seeking miner would."""

    def build(self, spec, gpu):
        return None

    def multiply(self, spec, gpu, a, x):
        keys = round_keys(bytes.fromhex(spec.key), gpu, spec.hash_rounds)
        cols, step = np.arange(spec.n, dtype=np.uint32), -(-spec.n // self.threads)

        def rows(r0: int) -> np.ndarray:
            block = elements_cpu(
                np.arange(r0, min(spec.n, r0 + step), dtype=np.uint32), cols, keys, fused=True
            )
            return product_np(block, x)

        with ThreadPoolExecutor(max_workers=self.threads) as pool:
            return np.concatenate(list(pool.map(rows, range(0, spec.n, step))))


def _ram_round(engine, challenge, policy):
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
    timing = judge_memory_timing(challenge, started, arrivals, policy)
    return proven_bytes(challenge, maths, timing)[0], timing


@pytest.mark.parametrize(("engine", "credited"), [(MemoryEngine, True), (NoRam, False)])
@pytest.mark.slow
def test_host_ram_is_credited_only_when_resident(engine, credited) -> None:
    """RAM: the bound is the host's cores x the fastest per-core regeneration, so a prover
    regenerating A on every pass with all its cores and the compiled kernel is too slow: 0 bytes."""
    # planned for 0.25 GB/s per core (production: 1): the shared CI machine runs this test under load
    challenge, policy = ram_challenge(
        0.004, os.cpu_count() or 1, HostPolicy(core_pass_gbs=0.25), rng=np.random.default_rng(4)
    )
    proven, timing = _ram_round(engine, challenge, policy)
    assert proven == (challenge.matrix_bytes if credited else 0), timing.reasons


def test_the_former_constant_bound_was_below_what_one_core_regenerates() -> None:
    """The former bound assumed 1e9 element-rounds/s for any host; the compiled mixer alone does more
    on one core of this shared 2-core machine (best of 10 short runs; ~1e10 when it is quiet), so a
    host of a few cores regenerated every pass in time and RAM it never held was credited."""
    keys = round_keys(b"k" * 16, 0, 64)
    rows, cols = np.arange(16, dtype=np.uint32), np.arange(4096, dtype=np.uint32)
    elements_cpu(rows[:1], cols[:8], keys)  # compile
    best = min(_timed(elements_cpu, rows, cols, keys)[1] for _ in range(10))
    assert 16 * 4096 * 64 / best > 1e9


def test_hiding_cores_to_loosen_the_ram_bound_costs_more_than_the_ram_term_pays() -> None:
    """The bound counts max(reported cores, proven cores); showing one core fewer to regenerate with it
    costs a core of CPU credit, more than the whole RAM term can add at the probed size."""
    config = load_holistic_config()
    one_core = config.host.cpu_cores.weight / config.host.cpu_cores.cap
    whole_ram_term = config.host.ram_gb.weight * min(
        1.0, DepthParams().probe_ram_mb / 1000 / config.host.ram_gb.cap
    )
    assert one_core > 10 * whole_ram_term


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
