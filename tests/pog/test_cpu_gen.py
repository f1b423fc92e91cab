"""Fused CPU generator (numba): bit-identical to the numpy reference, numpy fallback, worker round."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from compute.pog import cpu_gen
from compute.pog.generator import PRECISION_BITS, index_values, mix_block_np


@pytest.fixture
def fresh_kernel(monkeypatch):
    """Forget the process's cached kernel choice (and restore it afterwards)."""
    monkeypatch.setattr(cpu_gen, "_CPU_KERNEL", [])


@pytest.mark.parametrize("precision", sorted(PRECISION_BITS))
def test_fused_kernel_is_bit_identical_to_numpy(precision: str, fresh_kernel) -> None:
    pytest.importorskip("numba")
    bits = PRECISION_BITS[precision]
    rows = index_values(12345, 7, 97)
    cols = index_values(2**32 - 99, 1 << 40, 301)  # the counter wraps around 2**32
    cols[:3] = [0, 2**32 - 1, 2**31]  # row + column wraps too
    out = np.full((97, 301), np.nan, dtype=np.float32)
    cpu_gen.fill_cpu_fused(rows, cols, bits, out)
    assert np.array_equal(out.view(np.uint32), mix_block_np(rows, cols, bits).view(np.uint32))


def test_fused_kernel_writes_row_slices_of_a_larger_buffer(fresh_kernel) -> None:
    """The engine hands each thread a row slice of one slab: the kernel writes exactly that slice."""
    pytest.importorskip("numba")
    rows, cols = index_values(1, 0, 64), index_values(2, 4096, 128)
    slab = np.zeros((64, 128), dtype=np.float32)
    cpu_gen.fill_cpu_fused(rows[16:40], cols, 11, slab[16:40])
    want = np.zeros_like(slab)
    want[16:40] = mix_block_np(rows[16:40], cols, 11)
    assert np.array_equal(slab, want)


def test_large_calls_use_numba_small_ones_numpy(fresh_kernel) -> None:
    pytest.importorskip("numba")
    assert cpu_gen.cpu_generator_backend(cpu_gen.CPU_FUSED_MIN_ELEMENTS) == "numba"
    assert cpu_gen.cpu_generator_backend(cpu_gen.CPU_FUSED_MIN_ELEMENTS - 1) == "numpy"
    rows, cols = index_values(3, 0, 256), index_values(4, 0, 4096)  # exactly the threshold
    out = cpu_gen.fill_cpu_block(rows, cols, 24, np.empty((256, 4096), np.float32))
    assert np.array_equal(out, mix_block_np(rows, cols, 24))


def test_environment_forces_numpy(fresh_kernel, monkeypatch) -> None:
    monkeypatch.setenv(cpu_gen.CPU_GENERATOR_ENV, "numpy")
    assert cpu_gen.cpu_fused_kernel() is None
    assert cpu_gen.cpu_generator_backend(1 << 30) == "numpy"
    with pytest.raises(RuntimeError, match="needs numba"):
        cpu_gen.fill_cpu_fused(index_values(1, 0, 2), index_values(2, 0, 2), 11, np.empty((2, 2), np.float32))
    rows, cols = index_values(5, 0, 300), index_values(6, 0, 4000)
    assert np.array_equal(
        cpu_gen.fill_cpu_block(rows, cols, 11, np.empty((300, 4000), np.float32)),
        mix_block_np(rows, cols, 11),
    )


def test_without_numba_the_generator_is_numpy(fresh_kernel, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "numba", None)  # import numba raises ImportError
    assert cpu_gen.cpu_fused_kernel() is None
    assert cpu_gen.cpu_generator_backend(1 << 30) == "numpy"


def test_a_numba_that_cannot_compile_falls_back_to_numpy(fresh_kernel, monkeypatch) -> None:
    numba = pytest.importorskip("numba")

    def broken_njit(*args, **kwargs):
        def decorate(func):
            def call(*call_args):
                raise RuntimeError("no code generation on this CPU")

            return call

        return decorate

    monkeypatch.setattr(numba, "njit", broken_njit)
    assert cpu_gen.cpu_fused_kernel() is None
    rows, cols = index_values(7, 0, 300), index_values(8, 0, 4000)
    out = cpu_gen.fill_cpu_block(rows, cols, 8, np.empty((300, 4000), np.float32))
    assert np.array_equal(out, mix_block_np(rows, cols, 8))


@pytest.mark.slow
def test_worker_script_round_on_the_fused_kernel(tmp_path: Path) -> None:
    """The embedded worker (a temp-file script) compiles the kernel in its warm-up and verifies."""
    pytest.importorskip("numba")
    from compute.pog import choose_openings, new_challenge, verify, worker_script
    from compute.pog.wire import Commitment, Opening

    source, _ = worker_script()
    (tmp_path / "worker.py").write_text(source)
    # 1024 x 8192 slabs: >= 1M elements per call (the fused kernel's threshold) on up to 8 threads
    challenge = new_challenge("fp32", m=1024, n=8192, p=1024, gpu_count=1, chunk=8192)
    request = choose_openings(challenge)
    lines = [
        {"op": "warmup", "challenge": challenge.model_dump()},
        {"op": "commit", "challenge": challenge.model_dump()},
        {"op": "open", "request": request.model_dump()},
        {"op": "exit"},
    ]
    # as the validator's bootstrap runs it: compiled from text (no file, so no numba disk cache)
    script = (
        "import sys; sys.argv = ['pog_worker', '--device', 'cpu'];"
        " exec(compile(open('worker.py').read(), 'pog_worker', 'exec'), globals())"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", script],
        input="".join(json.dumps(line) + "\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    warm, committed, opened = (json.loads(line) for line in done.stdout.splitlines()[:3])
    assert warm["ok"] and committed["ok"], (warm, committed)
    commitment = Commitment.model_validate(committed["commitment"])
    verdict = verify(challenge, commitment, request, Opening.model_validate(opened["opening"]))
    assert verdict.ok, verdict.reasons
