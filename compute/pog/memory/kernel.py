"""Memory proof v2, the arithmetic shared by prover and validator: keyed 32-bit elements, exact passes.

Every element of a GPU's resident matrix A (n x n, uint32) is ``element(i, j)``: ``hash_rounds``
rounds of a keyed two-lane 32-bit ARX mixer (add, xor, odd multiply, xorshift) over the pair
``(i, j)``. The output is a full 32-bit word (no grid, no float: every bit is needed), each round is
a permutation of the 64-bit state (distinct pairs never share a state) and the round keys come from
the challenge key, so the only encodings of A are A itself or its regeneration, which costs
``hash_rounds`` rounds per element.

A pass is exact integer arithmetic mod 2^32: ``y_r = A @ x_{r-1}`` and the keyed nonlinear step
``x_r = fmix32(y_r ^ c_r ^ w_r)`` (murmur3 finaliser; ``c_r`` keyed per GPU and pass from the key and
the start nonce; ``w_r`` a word from the leaves of EVERY GPU's pass r, so all GPUs advance in
lockstep and one device cannot run two GPUs' chains one after the other). Since ``fmix32`` is a
bijection and ``c_r`` is keyed, no vector is a fixed point and a zero ``y`` still yields a random x.

numpy (uint32, wrapping) for the validator and the CPU prover; torch int32 (wrapping multiply, masked
logical shifts) for the CUDA prover, bit-identical. Embedded verbatim in the worker script: stdlib +
numpy (+ torch when present) only. It neither chooses challenges nor judges answers.
"""

from __future__ import annotations

import hashlib

import numpy as np

MEM_VERSION = b"compute-pog-mem/3"
MAX_MEM_N = 1 << 18
MAX_PASSES = 256
MAX_HASH_ROUNDS = 4096
M1 = 0x9E3779B1  # odd multipliers of the element mixer
M2 = 0x85EBCA77
F1 = 0x85EBCA6B  # murmur3 fmix32
F2 = 0xC2B2AE35
_PIECE = 1 << 14  # elements per in-cache piece of the element generator
ROUND_GROUP = 16  # rounds per fused torch kernel (plans use multiples of it)
_U = np.uint32


def _i32(value: int) -> int:
    """A uint32 constant as the signed int32 torch needs."""
    return value - (1 << 32) if value >= 1 << 31 else value


def _words(tag: bytes, count: int) -> np.ndarray:
    """``count`` uint32 words of SHAKE-256 over ``tag`` (keys, offsets)."""
    return np.frombuffer(hashlib.shake_256(MEM_VERSION + tag).digest(4 * count), dtype="<u4").astype(_U)


def gpu_key(key: bytes, gpu: int) -> bytes:
    return hashlib.blake2b(MEM_VERSION + key + int(gpu).to_bytes(4, "little"), digest_size=16).digest()


def round_keys(key: bytes, gpu: int, rounds: int) -> np.ndarray:
    """uint32 words: [lane a key, lane b key, one key per round] of one GPU's element mixer."""
    return _words(b"|rounds|" + gpu_key(key, gpu), rounds + 2)


def elements_np(rows: np.ndarray, cols: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """uint32 block A[rows][:, cols]; in-cache pieces so the temporaries stay hot across rounds."""
    a_all = (rows.astype(_U)[:, None] ^ keys[0]) + np.zeros(len(cols), dtype=_U)[None, :]
    b_all = np.broadcast_to(cols.astype(_U)[None, :] ^ keys[1], a_all.shape).copy()
    a_flat, b_flat = a_all.reshape(-1), b_all.reshape(-1)
    tmp_all = np.empty(min(_PIECE, a_flat.size), dtype=_U)
    m1, m2, s15, s16 = _U(M1), _U(M2), _U(15), _U(16)
    for start in range(0, a_flat.size, _PIECE):
        a, b = a_flat[start : start + _PIECE], b_flat[start : start + _PIECE]
        tmp = tmp_all[: a.size]
        for k in keys[2:]:
            a += k
            a ^= b
            a *= m1
            np.right_shift(a, s16, out=tmp)
            a ^= tmp
            b ^= a
            b *= m2
            np.right_shift(b, s15, out=tmp)
            b ^= tmp
    return b_all


def _mix_rounds(a, b, keys):
    """``len(keys)`` mixer rounds on int32 tensors (keys: an int32 tensor): the torch twin of the
    loop in ``elements_np``; masked shifts make ``>>`` logical."""
    for k in range(keys.shape[0]):
        a = (a + keys[k]) ^ b
        a = a * _i32(M1)
        a = a ^ ((a >> 16) & 0xFFFF)
        b = b ^ a
        b = b * _i32(M2)
        b = b ^ ((b >> 15) & 0x1FFFF)
    return a, b


def _mv(a, x, wide):
    return (a * x).sum(1, dtype=wide)


def _mv_blocks(a, x, wide, block_bytes: int = 256 << 20):
    """Eager ``_mv`` in row blocks: the wrapping products of one block at a time (no n x n temp)."""
    import torch

    step = max(1, block_bytes // (4 * a.shape[1]))
    return torch.cat([_mv(a[r0 : r0 + step], x, wide) for r0 in range(0, a.shape[0], step)])


_FUSED: dict = {}


def fused(name: str, fn, *args, eager=None):
    """``fn(*args)`` through ``torch.compile`` (one fused kernel on CUDA: the generator and the pass
    run at device speed); if compiling fails (no compiler or Triton on this machine), ``eager`` (or
    ``fn``) from then on: exact, only slower."""
    import torch

    if name not in _FUSED:
        _FUSED[name] = torch.compile(fn, dynamic=False)
    try:
        return _FUSED[name](*args)
    except Exception:
        _FUSED[name] = eager or fn
        return _FUSED[name](*args)


def elements_torch(rows, cols, keys, compiled: bool = False):
    """Torch twin of ``elements_np`` (``rows``, ``cols`` int64 index tensors; ``keys`` the uint32
    array or its int32 tensor on the device), bit-identical: int32 tensors, rounds in groups of
    ``ROUND_GROUP`` (one fused kernel per group when ``compiled``)."""
    import torch

    k = keys
    if isinstance(keys, np.ndarray):
        k = torch.from_numpy(np.ascontiguousarray(keys).view(np.int32).copy()).to(rows.device)
    a = (rows.to(torch.int32)[:, None] ^ k[0]).expand(len(rows), len(cols)).contiguous()
    b = (cols.to(torch.int32)[None, :] ^ k[1]).expand(len(rows), len(cols)).contiguous()
    body = k[2:]
    for g in range(0, len(body), ROUND_GROUP):
        group = body[g : g + ROUND_GROUP]
        if compiled and len(group) == ROUND_GROUP:
            a, b = fused("rounds", _mix_rounds, a, b, group)
        else:
            a, b = _mix_rounds(a, b, group)
    return b


def fmix_np(v: np.ndarray) -> np.ndarray:
    """murmur3 fmix32 on uint32 (a bijection)."""
    v = v.astype(_U, copy=True)
    v ^= v >> _U(16)
    v *= _U(F1)
    v ^= v >> _U(13)
    v *= _U(F2)
    v ^= v >> _U(16)
    return v


def chain_tag(key: bytes, start: bytes, gpu: int) -> bytes:
    return b"|chain|" + gpu_key(key, gpu) + start


def start_vector(key: bytes, start: bytes, gpu: int, n: int) -> np.ndarray:
    """x_0: n keyed uint32 words, known only once the start nonce is."""
    return _words(chain_tag(key, start, gpu) + b"|x0", n)


def pass_offsets(key: bytes, start: bytes, gpu: int, r: int, n: int) -> np.ndarray:
    """c_r: n keyed uint32 words of pass r."""
    return _words(chain_tag(key, start, gpu) + b"|c|" + int(r).to_bytes(4, "little"), n)


def pass_leaf(challenge_id: bytes, gpu: int, r: int, y: np.ndarray) -> bytes:
    """SHA-256 leaf of y_r (uint32 little-endian)."""
    h = hashlib.sha256(b"\x02" + challenge_id + int(gpu).to_bytes(4, "little") + int(r).to_bytes(4, "little"))
    h.update(np.ascontiguousarray(y, dtype="<u4").tobytes())
    return h.digest()


def lockstep_word(leaves: list[bytes]) -> np.uint32:
    """w_r: a word of all GPUs' pass-r leaves (hex or bytes, in GPU order)."""
    joined = b"".join(bytes.fromhex(x) if isinstance(x, str) else x for x in leaves)
    return _U(int.from_bytes(hashlib.sha256(b"|w|" + joined).digest()[:4], "little"))


def next_x(y: np.ndarray, offsets: np.ndarray, word: np.uint32) -> np.ndarray:
    """x_r = fmix32(y_r ^ c_r ^ w_r)."""
    return fmix_np(y.astype(_U) ^ offsets ^ word)


def product_np(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """y = A @ x mod 2^32 (numpy's integer matmul wraps)."""
    return np.matmul(a, x.astype(_U))


def product_torch(a, x: np.ndarray) -> np.ndarray:
    """y = A @ x mod 2^32 for an int32 tensor A: ``torch.mv`` on CPU; on CUDA (no integer mv there)
    one fused multiply-and-sum kernel over A, exact in int64; returns uint32 numpy."""
    import torch

    xt = torch.from_numpy(np.ascontiguousarray(x, dtype=_U).view(np.int32)).to(a.device)
    if a.device.type == "cpu":
        return torch.mv(a, xt).numpy().view(_U)
    return (fused("pass", _mv, a, xt, torch.int64, eager=_mv_blocks).cpu().numpy() & 0xFFFFFFFF).astype(_U)
