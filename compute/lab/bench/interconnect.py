"""Interconnect proof vs a plain all-reduce of the same size on the same links, and the verify cost.

Starts ``--world`` local participants (``compute.interconnect.local_participants``: processes on
127.0.0.1, gloo on CPU, NCCL where ``--device cuda``), then alternates proofs and plain
all-reduces of the same int32 vector over the same process group, each timed on the validator's
clock from its first request line to the last reply, and keeps each one's best of ``--repeats``.
``proof_vs_plain`` is the proof's bandwidth per link over the plain all-reduce's (target >= 0.9);
``verify_cpu_ms_per_link`` is the validator's CPU for the openings divided by the participants
(target <= 10 ms). The participants' own phase times (generate, reduce, hash) are advisory and
show where the proof's interval goes.
"""

from __future__ import annotations

import statistics

from compute.interconnect import InterconnectSession, local_participants, new_challenge
from compute.interconnect.wire import PhaseTimes

RATIO_TARGET = 0.9
VERIFY_MS_TARGET = 10.0


def measure(world: int, mib: float, repeats: int, chunk_len: int, device: str, segment_chunks: int) -> dict:
    vector_bytes = int(mib * (1 << 20))
    with local_participants(world) as (channels, init):
        session = InterconnectSession(channels)  # type: ignore[arg-type]
        readies = session.setup(init, device=device, timeout_s=120, segment_chunks=segment_chunks)
        endpoints = [c.endpoint for c in channels]

        def challenge():  # noqa: ANN202
            return new_challenge(endpoints, vector_bytes, deadline_s=60.0, chunk_len=chunk_len)

        words = challenge().chunks * chunk_len
        session.prove(challenge())  # warm-up: first touch, allocator, thread pools
        session.plain(words)
        proofs, plains = [], []
        phases: list[PhaseTimes] = []
        for _ in range(max(1, repeats)):
            proofs.append(session.prove(challenge()))
            phases.extend(c.phases for c in session.last_commits.values() if c.phases is not None)
            plains.append(session.plain(words))
    first = challenge()
    best_proof = min((v.interval_s or float("inf")) for v in proofs)
    best_plain = min(p.interval_s for p in plains)
    verify_ms = max(v.verify_cpu_s for v in proofs) / world * 1000
    ratio = best_plain / best_proof
    return {
        "device": readies[0].device,
        "world": world,
        "vector_mib": vector_bytes / (1 << 20),
        "link_mib": first.link_bytes / (1 << 20),
        "all_passed": all(v.passed for v in proofs),
        "proof_interval_s": best_proof,
        "proof_link_gbs": first.link_bytes / best_proof / 1e9,
        "plain_interval_s": best_plain,
        "plain_link_gbs": first.link_bytes / best_plain / 1e9,
        "plain_own_reduce_s": min(p.reduce_s for p in plains),
        "proof_vs_plain": ratio,
        "proof_vs_plain_target": RATIO_TARGET,
        "proof_vs_plain_met": ratio >= RATIO_TARGET,
        "verify_cpu_ms_per_link": verify_ms,
        "verify_cpu_ms_target": VERIFY_MS_TARGET,
        "verify_met": verify_ms <= VERIFY_MS_TARGET,
        "opened_per_link": first.open_per_participant,
        "phase_generate_s": statistics.median(p.generate_s for p in phases),
        "phase_reduce_wait_s": statistics.median(p.reduce_s for p in phases),
        "phase_hash_s": statistics.median(p.hash_s for p in phases),
        "phase_total_s": statistics.median(p.total_s for p in phases),
        "repeats": repeats,
    }


def main(argv: list[str] | None = None) -> int:
    import argparse

    from compute.lab.report import emit

    parser = argparse.ArgumentParser(
        prog="python -m compute bench interconnect", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--world", type=int, default=2, help="participants (local processes)")
    parser.add_argument("--mib", type=float, default=16.0, help="the all-reduced vector's size in MiB")
    parser.add_argument(
        "--repeats", type=int, default=5, help="proofs and plain all-reduces timed (best kept)"
    )
    parser.add_argument("--chunk-len", type=int, default=4096, help="int32 words per Merkle leaf")
    parser.add_argument("--segment-chunks", type=int, default=256, help="chunks per pipelined all-reduce")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="cpu", help="cuda: NCCL")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    args = parser.parse_args(argv)
    figures = measure(args.world, args.mib, args.repeats, args.chunk_len, args.device, args.segment_chunks)
    emit(figures, args.json, f"Interconnect proof vs plain all-reduce ({args.world} participants)")
    return 0
