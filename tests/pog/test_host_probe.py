"""Host probes run for real (threads, RAM, a temp dir) and are checked from the seed alone."""

from __future__ import annotations

import time

import pytest

from compute.pog.host_probe import check_probe, run_probe

SEED = "ab" * 16


def _timed(request: dict) -> tuple[dict, float]:
    started = time.perf_counter()
    result = run_probe(request)
    return result, time.perf_counter() - started


def test_cpu_probe_verifies_and_reports_cores_and_rate() -> None:
    request = {"what": "cpu", "seed": SEED, "chains": 2, "steps": 50}
    result, elapsed = _timed(request)
    check = check_probe(request, result, elapsed)
    assert check.ok, check.reasons
    assert check.value == min(2, result["usable"]) and check.rate > 0


def test_cpu_probe_with_forged_chain_fails() -> None:
    request = {"what": "cpu", "seed": SEED, "chains": 3, "steps": 10}
    result, elapsed = _timed(request)
    result["digests"][2] = "00" * 32
    check = check_probe(request, result, elapsed)
    assert not check.ok and "chains [2]" in check.reasons[0]


def test_ram_probe_digest_is_recomputed_by_the_validator() -> None:
    request = {"what": "ram", "seed": SEED, "bytes": 8 << 20}
    result, elapsed = _timed(request)
    check = check_probe(request, result, elapsed)
    assert check.ok and check.value == pytest.approx(8 * 2**20 / 1e9)
    smaller = dict(result, bytes=4 << 20)
    assert not check_probe(request, smaller, elapsed).ok


def test_disk_probe_writes_reads_back_and_cleans_up(tmp_path) -> None:
    request = {"what": "disk", "seed": SEED, "bytes": 6 << 20, "path": str(tmp_path)}
    result, elapsed = _timed(request)
    check = check_probe(request, result, elapsed)
    assert check.ok and check.rate > 0 and result["free_bytes"] > 0
    assert list(tmp_path.iterdir()) == []
    other = run_probe({**request, "seed": "cd" * 16})
    assert not check_probe(request, other, elapsed).ok  # a digest of other data never passes


@pytest.mark.parametrize(
    "request_",
    [
        {"what": "gpu", "seed": SEED},
        {"what": "cpu", "seed": "zz", "chains": 1, "steps": 1},
        {"what": "cpu", "seed": SEED, "chains": 0, "steps": 1},
        {"what": "disk", "seed": SEED, "bytes": 64, "path": "/nonexistent/dir"},
        "not an object",
    ],
)
def test_bad_probe_requests_are_refused(request_) -> None:
    with pytest.raises(ValueError):
        run_probe(request_)


def test_check_never_raises_on_garbage() -> None:
    assert not check_probe({"what": "cpu", "seed": SEED, "chains": 1, "steps": 1}, None, 1.0).ok
    assert not check_probe("junk", {}, 1.0).ok  # type: ignore[arg-type]
    assert not check_probe({"what": "ram", "seed": SEED, "bytes": 64}, {"what": "ram"}, 0.0).ok
