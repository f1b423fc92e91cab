"""A multi-host miner is credited the sum of its proven hosts, and never gains from claiming hosts."""

from __future__ import annotations

import pytest

from compute.store import PogResult
from compute.validator.proofs.hostproof import HostProof, combine_hosts, credited_samples

HOTKEY = "5" + "H" * 47


def _proof(name: str, sample: float, uuids: tuple[str, ...], ok: bool = True, **extra: object) -> HostProof:
    result = PogResult(
        round_id=1,
        uid=3,
        hotkey=HOTKEY,
        ok=ok,
        sample=sample if ok else 0.0,
        reasons=() if ok else ("allocate refused: no_capacity",),
        models=("H100",) * len(uuids) if ok else (),
        tflops_fp16=100.0 if ok else None,
        gpu_count=len(uuids),
        credited_gpus=len(uuids),
        gpu_uuids=uuids,
        timings={"total_s": 5.0},
    )
    return HostProof(name, result, **extra)  # type: ignore[arg-type]


def test_distinct_proven_hosts_add_up() -> None:
    result = combine_hosts([_proof("a", 2.0, ("GPU-1", "GPU-2")), _proof("b", 1.0, ("GPU-3",))])
    assert result.ok and result.sample == pytest.approx(3.0)
    assert result.hosts == {"a": 2.0, "b": 1.0}
    assert result.gpu_count == 3 and result.models == ("H100",) * 3
    assert set(result.timings) == {"a.total_s", "b.total_s"}


def test_an_unproven_or_down_host_adds_nothing() -> None:
    result = combine_hosts(
        [_proof("a", 2.0, ("GPU-1",)), _proof("ghost", 5.0, ("GPU-9",), ok=False)], down=["off"]
    )
    assert result.sample == pytest.approx(2.0)
    assert result.hosts == {"a": 2.0, "ghost": 0.0, "off": 0.0}
    assert any("ghost: not proven" in r for r in result.reasons)
    assert any("off: down" in r for r in result.reasons)
    nothing = combine_hosts([_proof("ghost", 5.0, ("GPU-9",), ok=False)])
    assert not nothing.ok and nothing.sample == 0.0


def test_cheater_one_gpu_shown_as_two_hosts_is_credited_once() -> None:
    """The cheapest cheat: the same engine (same GPU) listed twice under two names."""
    honest = combine_hosts([_proof("a", 2.0, ("GPU-1",))])
    cheat = combine_hosts([_proof("a", 2.0, ("GPU-1",)), _proof("a-again", 2.1, ("GPU-1",))])
    assert cheat.sample <= honest.sample + 0.1 and cheat.sample == pytest.approx(2.1)
    assert sorted(cheat.hosts.values()) == [0.0, 2.1]
    assert any("same device as host a-again" in r for r in cheat.reasons)
    assert cheat.gpu_count == 1 and cheat.gpu_uuids == ("GPU-1",)


def test_cheater_with_forged_uuids_is_caught_by_the_lease_it_reuses() -> None:
    """Other UUIDs reported (NVML lies), but both "hosts" are one box: the same lease host key."""
    same_box = {"host_keys": frozenset({"ssh-ed25519 AAAAKEY"})}
    cheat = credited_samples(
        [_proof("a", 2.0, ("GPU-1",), **same_box), _proof("b", 2.0, ("GPU-X",), **same_box)]
    )
    assert sorted(v for v, _ in cheat.values()) == [0.0, 2.0]


def test_claiming_many_empty_hosts_never_raises_the_score() -> None:
    real = _proof("a", 2.0, ("GPU-1",))
    claims = [_proof(f"fake{i}", 9.0, (f"GPU-F{i}",), ok=False) for i in range(5)]
    assert combine_hosts([real, *claims]).sample == pytest.approx(combine_hosts([real]).sample)


def test_cheater_one_cpu_box_shown_as_two_hosts_is_credited_once() -> None:
    """CPU-only hosts have no resident-memory proof: one SSH address counts as one machine."""
    a = _proof("a", 0.002, (), ssh_endpoints=frozenset({"203.0.113.5:40001"}))
    b = _proof("b", 0.003, (), ssh_endpoints=frozenset({"203.0.113.5:40002"}))
    other = _proof("c", 0.001, (), ssh_endpoints=frozenset({"203.0.113.6:40001"}))
    result = combine_hosts([a, b, other])
    assert result.hosts == {"a": 0.0, "b": 0.003, "c": 0.001}
    assert result.sample == pytest.approx(0.004)
