"""Host proofs, validator side: requests, spot checks and figures on the validator's own clock.

- cpu (``check_cpu``): ``CPU_SEGMENT_CHECKS`` random (chain, segment) pairs are recomputed from the
  previous checkpoint (a few MB of hashing, not the whole work). Hashed GB/s = the work asked for /
  the validator-timed elapsed; credited cores = min(chains, GB/s / ``reference_core_gbs``): cores
  in units of a fast reference core, never the miner's own count, so pacing only lowers it.
- disk (``check_disk``, protocol version 3): opened blocks' Merkle paths must reach the root
  committed at write time, and each asked ``block_k`` must be ``disk_block(seed, k, block_{k-1},
  block_{r(k)})`` of the opened parents. The read must answer before a prover without the file could
  regenerate the chain up to the highest index asked (one 4 KiB SHAKE-256 squeeze per block at
  ``max_core_gbs``, the fastest single core: the least a regenerating prover does per block); else
  nothing is credited. What a timely read proves is less than the bytes written: a prover keeping
  every c-th block regenerates the cone of missing parents of the asked blocks (measured at 131072
  blocks: 0.5 % of the chain at c = 4, 30 % at c = 12, 39 % at c = 16, 86 % at c = 64; three
  squeeze-units per block), and one keeping every block's SHAKE state (4.9 % of the data) squeezes
  instead of hashing. So it proves about 1/20 of the bytes were kept, and that is what is credited
  (``DISK_PROVEN_FRACTION``).

- RAM (``ram_challenge``): the memory proof v2 resident in host memory (``compute.pog.memory``),
  judged against the fastest regeneration a host of its size could run: ``cores`` x
  ``core_regen_rate`` (the compiled mixer ``memory.cpu_kernel`` measured ~1e10 element-rounds/s on
  one AVX2 core; the policy doubles it for AVX-512), never a constant. Rounds follow, so an honest
  prover that builds with the same kernel and reads A with every core keeps the margin on any host.

Every check costs the validator milliseconds (budget: 0.05 s of CPU per miner for all host proofs)
and never raises.
"""

from __future__ import annotations

import base64
import math
import secrets
from dataclasses import dataclass, field

import numpy as np

from ..draws import CPU_CHECKS, DISK_BLOCKS, oracle_rng
from ..memory import MemoryChallenge, MemoryPolicy, plan_memory
from ..merkle import root_from_path
from .probe import (
    CPU_CHECKPOINTS,
    DISK_BLOCK,
    MAX_DISK_READS,
    PROBE_VERSION,
    block_leaf,
    chain_origin,
    chain_steps,
    cpu_block,
    disk_block,
    disk_parent,
)

CPU_SEGMENT_CHECKS = 8
DISK_PROVEN_FRACTION = 0.05  # of the bytes written: what a timely read-back proves was kept


@dataclass(frozen=True)
class HostPolicy:
    """``reference_core_gbs``: SHA-256 GB/s of one fast core (SHA-NI class) = one credited core;
    ``max_core_gbs``: disk-chain bytes one core could regenerate per second (bounds the read);
    ``core_regen_rate``: element-rounds/s one core regenerates the RAM proof's A at (the fastest
    kernel we have, x2); ``core_pass_gbs``: what one core of an honest prover reads per pass (sizes
    the rounds, with margin: the compiled pass read 2-14 GB/s per core here, numpy 0.9-1.6)."""

    reference_core_gbs: float = 1.0
    max_core_gbs: float = 1.2  # 4 KiB SHAKE-256 squeezes: ~0.6-1 GB/s on a fast x86 core (this VM: ~0.3)
    core_regen_rate: float = 2e10
    core_pass_gbs: float = 1.0


def ram_challenge(
    size_gb: float, cores: float, policy: HostPolicy | None = None, passes: int = 8, rng=None
) -> tuple[MemoryChallenge, MemoryPolicy]:
    """The host-RAM memory proof for a host of ``cores`` cores, and the policy its timing is judged by.

    Regeneration is bounded by ``cores x core_regen_rate`` and the honest pass is assumed to read
    ``cores x core_pass_gbs``, so the rounds (margin 8 x at plan, 3 x judged) do not depend on the
    core count, and a host with more cores than it showed only makes its own regeneration look slow.
    """
    policy = policy or HostPolicy()
    cores = max(1.0, float(cores))
    judge = MemoryPolicy(
        max_regen_rate=cores * policy.core_regen_rate, host_stream_gbs=0.0, min_bandwidth_fraction=0.0
    )
    challenge = plan_memory(
        size_gb, cores * policy.core_pass_gbs, 1, fraction=1.0, passes=passes, policy=judge, rng=rng
    )
    return challenge, judge


@dataclass(frozen=True)
class ProbeCheck:
    ok: bool
    what: str
    reasons: list[str] = field(default_factory=list)
    value: float = 0.0  # cpu: cores credited; disk: GB proven
    rate: float = 0.0  # cpu: GB/s hashed; disk: write GB/s (validator clock for both)


def cpu_request(chains: int, steps_per_checkpoint: int = 32) -> dict:
    return {
        "what": "cpu",
        "version": PROBE_VERSION,
        "seed": secrets.token_hex(16),
        "chains": chains,
        "steps": CPU_CHECKPOINTS * steps_per_checkpoint,
    }


def disk_write_request(nbytes: int) -> dict:
    """What the worker writes now (the seed is fresh; the path is the caller's)."""
    return {"seed": secrets.token_hex(16), "bytes": int(nbytes), "version": PROBE_VERSION}


def _version_problem(reply: dict) -> str | None:
    version = reply.get("version")
    if version != PROBE_VERSION:
        return f"the worker speaks host probe version {version!r}; this validator needs {PROBE_VERSION}"
    return None


def disk_read_request(
    blocks: int, reads: int = 8, rng: np.random.Generator | None = None, seed: str = ""
) -> dict:
    """Block indices to read back, drawn now (after the write): random, plus the last block.

    ``seed``: the write request's seed (names the draw for ``draws.oracle_rng``; secret otherwise)."""
    rng = rng or oracle_rng(DISK_BLOCKS, seed) or np.random.default_rng(secrets.randbits(64))
    picks = {int(k) for k in rng.integers(0, blocks, min(reads, MAX_DISK_READS) - 1)} | {blocks - 1}
    return {"blocks": sorted(picks)}


def _check_cpu(request: dict, result: dict, elapsed_s: float, policy: HostPolicy, rng) -> ProbeCheck:
    seed, chains, steps = bytes.fromhex(request["seed"]), request["chains"], request["steps"]
    if (problem := _version_problem(result)) is not None:
        return ProbeCheck(False, "cpu", [problem])
    checkpoints = result.get("checkpoints")
    if (
        not isinstance(checkpoints, list)
        or len(checkpoints) != chains
        or any(not isinstance(c, list) or len(c) != CPU_CHECKPOINTS for c in checkpoints)
    ):
        return ProbeCheck(False, "cpu", [f"expected {chains} chains of {CPU_CHECKPOINTS} checkpoints"])
    block, per = cpu_block(seed), steps // CPU_CHECKPOINTS
    wrong = []
    for _ in range(CPU_SEGMENT_CHECKS):
        k, i = int(rng.integers(chains)), int(rng.integers(CPU_CHECKPOINTS))
        previous = chain_origin(seed, k) if i == 0 else bytes.fromhex(checkpoints[k][i - 1])
        if chain_steps(previous, block, per).hex() != checkpoints[k][i]:
            wrong.append((k, i))
    if wrong:
        return ProbeCheck(False, "cpu", [f"chain segments {wrong[:4]} have wrong digests"])
    gbs = chains * steps * (len(block) + 32) / elapsed_s / 1e9
    return ProbeCheck(True, "cpu", [], min(float(chains), gbs / policy.reference_core_gbs), gbs)


def check_cpu(
    request: dict, result: object, elapsed_s: float, policy: HostPolicy | None = None, rng=None
) -> ProbeCheck:
    """CPU probe verdict and credited cores (``elapsed_s`` on the validator's clock). Never raises."""
    try:
        if not (isinstance(elapsed_s, (int, float)) and math.isfinite(elapsed_s) and elapsed_s > 0):
            return ProbeCheck(False, "cpu", ["elapsed time must be positive"])
        if not isinstance(result, dict) or result.get("what") != "cpu":
            return ProbeCheck(False, "cpu", ["result does not answer the request"])
        rng = (
            rng
            or oracle_rng(CPU_CHECKS, str(request.get("seed")))
            or np.random.default_rng(secrets.randbits(64))
        )
        return _check_cpu(request, result, float(elapsed_s), policy or HostPolicy(), rng)
    except Exception as exc:  # the verdict boundary
        return ProbeCheck(False, "cpu", [f"malformed probe: {type(exc).__name__}: {exc}"])


def _opened_blocks(root: bytes, count: int, opened: list) -> dict[int, bytes] | str:
    blocks: dict[int, bytes] = {}
    for entry in opened:
        index, data = entry["index"], base64.b64decode(entry["data"], validate=True)
        if isinstance(index, bool) or not isinstance(index, int) or len(data) != DISK_BLOCK:
            return "malformed block"
        path = [bytes.fromhex(node) for node in entry["path"]]
        if root_from_path(block_leaf(data), index, count, path) != root:
            return f"block {index} is not under the committed root"
        blocks[index] = data
    return blocks


def _check_disk(write_request, write, write_s, read_request, read, read_s, policy) -> ProbeCheck:
    seed, nbytes = bytes.fromhex(write_request["seed"]), write_request["bytes"] // DISK_BLOCK * DISK_BLOCK
    count = nbytes // DISK_BLOCK
    if not isinstance(write, dict) or not isinstance(read, dict):
        return ProbeCheck(False, "disk", [f"disk probe did not write the {nbytes} bytes asked"])
    if (problem := _version_problem(write) or _version_problem(read)) is not None:
        return ProbeCheck(False, "disk", [problem])
    if write.get("bytes") != nbytes:
        return ProbeCheck(False, "disk", [f"disk probe did not write the {nbytes} bytes asked"])
    blocks = _opened_blocks(bytes.fromhex(write["root"]), count, read.get("blocks", []))
    if isinstance(blocks, str):
        return ProbeCheck(False, "disk", [blocks])
    for k in read_request["blocks"]:
        parent = disk_parent(seed, k)
        previous = b"" if k == 0 else blocks.get(k - 1)
        parent_block = b"" if parent is None else blocks.get(parent)
        if k not in blocks or previous is None or parent_block is None:
            return ProbeCheck(False, "disk", [f"block {k} (or a parent) was not read back"])
        if blocks[k] != disk_block(seed, k, previous, parent_block):
            return ProbeCheck(False, "disk", [f"block {k} is not the seeded data"])
    regen_s = (max(read_request["blocks"]) + 1) * DISK_BLOCK / (policy.max_core_gbs * 1e9)
    if read_s >= regen_s:
        return ProbeCheck(
            False,
            "disk",
            [
                f"read-back took {read_s * 1e3:.3g} ms: regenerating the chain could take {regen_s * 1e3:.3g} ms"
            ],
        )
    return ProbeCheck(True, "disk", [], DISK_PROVEN_FRACTION * nbytes / 1e9, nbytes / write_s / 1e9)


def check_disk(
    write_request: dict,
    write: object,
    write_s: float,
    read_request: dict,
    read: object,
    read_s: float,
    policy: HostPolicy | None = None,
) -> ProbeCheck:
    """Disk probe verdict (both durations on the validator's clock). Never raises."""
    try:
        if not all(isinstance(t, (int, float)) and math.isfinite(t) and t > 0 for t in (write_s, read_s)):
            return ProbeCheck(False, "disk", ["elapsed times must be positive"])
        return _check_disk(write_request, write, write_s, read_request, read, read_s, policy or HostPolicy())
    except Exception as exc:  # the verdict boundary
        return ProbeCheck(False, "disk", [f"malformed probe: {type(exc).__name__}: {exc}"])
