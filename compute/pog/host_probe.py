"""Host measurements run INSIDE the lease (CPU, RAM, disk) and their validator-side checks.

Prover side (``run_probe``, worker op ``probe``), stdlib + numpy only, embedded in the worker script:
- cpu: ``chains`` independent SHA-256 chains (step = sha256(previous digest || 64 KiB seeded block)),
  one per thread (hashlib releases the GIL on large buffers), so wall time on the validator's clock
  shows how many cores really run in parallel; every chain's final digest is returned.
- ram: allocates the requested bytes as seeded uint64 values (every page written), then returns a
  digest of seeded sample pages read back.
- disk: writes the requested bytes of seeded data to a file under ``path``, fsyncs, drops the page
  cache where the OS allows, reads it back, and returns the SHA-256 of what was read.

Validator side (``check_probe``): recomputes sample chains, the RAM sample digest and the full disk
digest from the seed (all closed-form), and turns the probe into figures on its own clock. The
figures are claims bounded by what the validator asked for (and the lease's limits): a digest proves
the work was done and the data read back intact, not that RAM stays allocated afterwards.
``check_probe`` never raises. No GPU, no network, no files outside ``path``.
"""

from __future__ import annotations

import hashlib
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

PROBE_TAG = b"compute-host-probe/1"
CPU_BLOCK = 64 * 1024
DISK_BLOCK = 4 * 1024 * 1024
PAGE = 4096
RAM_SAMPLES = 64
MAX_CHAINS = 512
MAX_STEPS = 1 << 16
MAX_PROBE_BYTES = 1 << 40
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _seed_bytes(seed: object) -> bytes:
    if not isinstance(seed, str) or len(seed) != 32:
        raise ValueError("seed must be 32 hex characters")
    return bytes.fromhex(seed)


def _cpu_block(seed: bytes) -> bytes:
    return hashlib.shake_256(PROBE_TAG + b"|cpu|" + seed).digest(CPU_BLOCK)


def cpu_chain(seed: bytes, index: int, steps: int, block: bytes | None = None) -> str:
    """Final digest (hex) of chain ``index``: h0 = blake2b(seed, index); h <- sha256(h || block)."""
    block = block if block is not None else _cpu_block(seed)
    digest = hashlib.blake2b(PROBE_TAG + seed + index.to_bytes(4, "little"), digest_size=32).digest()
    for _ in range(steps):
        digest = hashlib.sha256(digest + block).digest()
    return digest.hex()


def seeded_words(seed: bytes, start: int, count: int) -> np.ndarray:
    """uint64 words ``start .. start+count`` of the seeded stream (closed form, any offset)."""
    base = np.uint64(int.from_bytes(hashlib.blake2b(PROBE_TAG + seed, digest_size=8).digest(), "little"))
    with np.errstate(over="ignore"):
        z = np.arange(start, start + count, dtype=np.uint64) * _GOLDEN + base
        z ^= z >> np.uint64(29)
    return z


def ram_sample_pages(seed: bytes, nbytes: int) -> list[int]:
    pages = max(1, nbytes // PAGE)
    digest = hashlib.shake_256(PROBE_TAG + b"|ram|" + seed).digest(8 * RAM_SAMPLES)
    return sorted({int.from_bytes(digest[8 * k : 8 * k + 8], "little") % pages for k in range(RAM_SAMPLES)})


def ram_digest(seed: bytes, nbytes: int, words: np.ndarray | None = None) -> str:
    """Digest of the sample pages; from ``words`` (prover) or recomputed (validator)."""
    h = hashlib.sha256()
    per = PAGE // 8
    for page in ram_sample_pages(seed, nbytes):
        data = (
            words[page * per : (page + 1) * per] if words is not None else seeded_words(seed, page * per, per)
        )
        h.update(np.ascontiguousarray(data, dtype="<u8").tobytes())
    return h.hexdigest()


def disk_digest(seed: bytes, nbytes: int) -> str:
    """SHA-256 of the seeded disk stream of ``nbytes`` (multiple of 8)."""
    h = hashlib.sha256()
    for offset in range(0, nbytes, DISK_BLOCK):
        count = min(DISK_BLOCK, nbytes - offset) // 8
        h.update(seeded_words(seed, offset // 8, count).astype("<u8").tobytes())
    return h.hexdigest()


def _probe_cpu(seed: bytes, chains: int, steps: int) -> dict:
    block = _cpu_block(seed)
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=chains) as pool:
        digests = list(pool.map(lambda k: cpu_chain(seed, k, steps, block), range(chains)))
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return {
        "logical": os.cpu_count() or 1,
        "usable": usable,
        "digests": digests,
        "elapsed_s": time.perf_counter() - started,
    }


def _probe_ram(seed: bytes, nbytes: int) -> dict:
    started = time.perf_counter()
    words = np.empty(nbytes // 8, dtype=np.uint64)
    step = DISK_BLOCK // 8
    for start in range(0, len(words), step):
        words[start : start + step] = seeded_words(seed, start, min(step, len(words) - start))
    digest = ram_digest(seed, nbytes, words)
    del words
    return {"bytes": nbytes, "digest": digest, "elapsed_s": time.perf_counter() - started}


def _probe_disk(seed: bytes, nbytes: int, path: str) -> dict:
    target = os.path.join(path, f".compute-probe-{seed.hex()[:16]}")
    try:
        started = time.perf_counter()
        with open(target, "wb") as handle:
            for offset in range(0, nbytes, DISK_BLOCK):
                count = min(DISK_BLOCK, nbytes - offset) // 8
                handle.write(seeded_words(seed, offset // 8, count).astype("<u8").tobytes())
            handle.flush()
            os.fsync(handle.fileno())
            if hasattr(os, "posix_fadvise"):
                os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        written = time.perf_counter()
        h = hashlib.sha256()
        with open(target, "rb") as handle:
            while chunk := handle.read(DISK_BLOCK):
                h.update(chunk)
        stat = os.statvfs(path)
        return {
            "bytes": nbytes,
            "digest": h.hexdigest(),
            "write_s": written - started,
            "read_s": time.perf_counter() - written,
            "free_bytes": stat.f_bavail * stat.f_frsize,
        }
    finally:
        if os.path.exists(target):
            os.remove(target)


def run_probe(request: object) -> dict:
    """Worker op ``probe``: {"what": "cpu"|"ram"|"disk", "seed": hex32, "chains", "steps", "bytes", "path"}."""
    if not isinstance(request, dict):
        raise ValueError("probe request must be an object")
    seed, what = _seed_bytes(request.get("seed")), request.get("what")

    def bounded(name: str, low: int, high: int) -> int:
        value = request.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(f"{name} must be an integer in [{low}, {high}]")
        return value

    if what == "cpu":
        return {
            "what": "cpu",
            **_probe_cpu(seed, bounded("chains", 1, MAX_CHAINS), bounded("steps", 1, MAX_STEPS)),
        }
    if what == "ram":
        return {"what": "ram", **_probe_ram(seed, bounded("bytes", 8, MAX_PROBE_BYTES) // 8 * 8)}
    if what == "disk":
        path = request.get("path", ".")
        if not isinstance(path, str) or not os.path.isdir(path):
            raise ValueError("path must be an existing directory")
        return {"what": "disk", **_probe_disk(seed, bounded("bytes", 8, MAX_PROBE_BYTES) // 8 * 8, path)}
    raise ValueError('what must be "cpu", "ram" or "disk"')


@dataclass(frozen=True)
class ProbeCheck:
    ok: bool
    what: str
    reasons: list[str] = field(default_factory=list)
    value: float = 0.0  # cpu: cores credited; ram/disk: GB proven
    rate: float = 0.0  # cpu: GB/s hashed; disk: write MB/s (validator clock for cpu, claim for disk)


def _check(request: dict, result: object, elapsed_s: float, verify_chains: int) -> ProbeCheck:
    seed, what = _seed_bytes(request["seed"]), request["what"]
    if not isinstance(result, dict) or result.get("what") != what:
        return ProbeCheck(False, what, ["result does not answer the request"])
    if what == "cpu":
        chains, steps, digests = request["chains"], request["steps"], result.get("digests")
        if not isinstance(digests, list) or len(digests) != chains:
            return ProbeCheck(False, what, [f"expected {chains} chain digests"])
        block = _cpu_block(seed)
        picks = sorted(set(np.linspace(0, chains - 1, min(verify_chains, chains)).astype(int).tolist()))
        wrong = [k for k in picks if digests[k] != cpu_chain(seed, k, steps, block)]
        if wrong:
            return ProbeCheck(False, what, [f"chains {wrong} have wrong digests"])
        usable = result.get("usable")
        cores = min(chains, usable) if isinstance(usable, int) and usable > 0 else 0
        return ProbeCheck(
            cores > 0,
            what,
            [] if cores else ["no usable cores reported"],
            float(cores),
            chains * steps * CPU_BLOCK / elapsed_s / 1e9,
        )
    nbytes = request["bytes"] // 8 * 8
    if result.get("bytes") != nbytes:
        return ProbeCheck(False, what, [f"{what} probe covered {result.get('bytes')} bytes, asked {nbytes}"])
    expected = ram_digest(seed, nbytes) if what == "ram" else disk_digest(seed, nbytes)
    if result.get("digest") != expected:
        return ProbeCheck(False, what, [f"{what} read-back digest does not match the seeded data"])
    rate = 0.0
    if what == "disk" and isinstance(result.get("write_s"), (int, float)) and result["write_s"] > 0:
        rate = nbytes / result["write_s"] / 1e6
    return ProbeCheck(True, what, [], nbytes / 1e9, rate)


def check_probe(request: dict, result: object, elapsed_s: float, verify_chains: int = 4) -> ProbeCheck:
    """Validator-side check of one probe (``elapsed_s`` on its own clock). Never raises."""
    what = request.get("what", "?") if isinstance(request, dict) else "?"
    try:
        if not (isinstance(elapsed_s, (int, float)) and math.isfinite(elapsed_s) and elapsed_s > 0):
            return ProbeCheck(False, str(what), ["elapsed time must be positive"])
        return _check(request, result, float(elapsed_s), verify_chains)
    except Exception as exc:  # the verdict boundary
        return ProbeCheck(False, str(what), [f"malformed probe: {type(exc).__name__}: {exc}"])
