"""Interconnect proof vs a plain all-reduce of the same size on the same links, and the verify cost.

Starts ``--world`` local participants (``compute.interconnect.local_participants``: processes on
127.0.0.1, gloo on CPU, NCCL where ``--device cuda``), then alternates proofs and plain
all-reduces of the same int32 vector over the same process group, each timed on the validator's
clock from its first request line to the last reply, and keeps each one's best of ``--repeats``.
``proof_vs_plain`` is the proof's bandwidth per link over the plain all-reduce's (target >= 0.9);
``verify_cpu_ms_per_link`` is the validator's CPU for the openings divided by the participants
(target <= 10 ms). The participants' own phase times (generate, reduce, hash) are advisory and
show where the proof's interval goes.

``--link-gbit R[,R...]`` (root, ``ip`` and ``tc``) runs the same comparison over a real link instead
of loopback: each participant in its own network namespace, all on one bridge
(``compute.localnet.netns.Shaped``), every participant's egress held to R Gbit/s by ``tbf``; one
session, re-shaped per rate. Each rate's figures add ``link_sent_mib``: what the participants
counted on their links per proof or plain all-reduce, the proof that the traffic crossed them.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from compute.interconnect import InterconnectSession, PipeChannel, local_participants, new_challenge
from compute.interconnect.wire import PhaseTimes

RATIO_TARGET = 0.9
VERIFY_MS_TARGET = 10.0


def compare(
    session: InterconnectSession,
    world: int,
    vector_bytes: int,
    repeats: int,
    chunk_len: int,
    deadline_s: float,
) -> dict[str, Any]:
    """Alternate proofs and plain all-reduces on one session (after one warm-up each); best of each."""
    endpoints = [c.endpoint for c in session.channels]

    def challenge():  # noqa: ANN202
        return new_challenge(endpoints, vector_bytes, deadline_s=deadline_s, chunk_len=chunk_len)

    words = challenge().chunks * chunk_len
    session.prove(challenge())  # warm-up: first touch, allocator, thread pools
    session.plain(words, timeout_s=deadline_s)
    proofs, plains = [], []
    phases: list[PhaseTimes] = []
    for _ in range(max(1, repeats)):
        proofs.append(session.prove(challenge()))
        phases.extend(c.phases for c in session.last_commits.values() if c.phases is not None)
        plains.append(session.plain(words, timeout_s=deadline_s))
    first = challenge()
    best_proof = min((v.interval_s or float("inf")) for v in proofs)
    best_plain = min(p.interval_s for p in plains)
    verify_ms = max(v.verify_cpu_s for v in proofs) / world * 1000
    ratio = best_plain / best_proof
    return {
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


def measure(world: int, mib: float, repeats: int, chunk_len: int, device: str, segment_chunks: int) -> dict:
    """Loopback: participants as processes on 127.0.0.1."""
    vector_bytes = int(mib * (1 << 20))
    with local_participants(world) as (channels, init):
        session = InterconnectSession(channels)  # type: ignore[arg-type]
        readies = session.setup(init, device=device, timeout_s=120, segment_chunks=segment_chunks)
        figures = compare(session, world, vector_bytes, repeats, chunk_len, deadline_s=60.0)
    return {"device": readies[0].device, **figures}


@contextmanager
def shaped_participants(world: int) -> Iterator[tuple[Any, list[PipeChannel], str]]:
    """``world`` participants, each in its own namespace on one bridge; the namespaces go on exit."""
    from compute.localnet.netns import SHAPED_IFNAME, Shaped

    links = Shaped(world)
    try:
        hosts = links.up()
        wrappers = [["ip", "netns", "exec", h.netns] for h in hosts]
        env = {"GLOO_SOCKET_IFNAME": SHAPED_IFNAME}
        with local_participants(world, wrappers=wrappers, rendezvous=hosts[0].address, env=env) as (
            channels,
            init,
        ):
            yield links, channels, init
    finally:
        links.down()


def measure_shaped(
    world: int, mib: float, repeats: int, chunk_len: int, segment_chunks: int, rates: Sequence[float]
) -> dict:
    """Over a real link: the same comparison at every rate in ``rates`` (Gbit/s), one session."""
    vector_bytes = int(mib * (1 << 20))
    per_rate = []
    with shaped_participants(world) as (links, channels, init):
        session = InterconnectSession(channels)  # type: ignore[arg-type]
        readies = session.setup(init, device="cpu", timeout_s=120, segment_chunks=segment_chunks)
        for gbit in rates:
            links.shape(gbit)
            deadline_s = max(60.0, 20 * vector_bytes * 8 / (gbit * 1e9))
            sent = links.tx_bytes()
            figures = compare(session, world, vector_bytes, repeats, chunk_len, deadline_s)
            runs = 2 * (max(1, repeats) + 1)  # proofs and plain all-reduces, warm-ups included
            sent_bytes = sum(links.tx_bytes()) - sum(sent)
            per_rate.append(
                {
                    "link_gbit": gbit,
                    "link_gbs": gbit / 8,
                    "link_sent_mib": sent_bytes / world / runs / (1 << 20),
                    **figures,
                }
            )
    return {"device": readies[0].device, "mode": "shaped", "world": world, "rates": per_rate}


def parse_rates(values: Sequence[str]) -> list[float]:
    """``--link-gbit 1 --link-gbit 2.5,5`` -> [1.0, 2.5, 5.0]."""
    return [float(part) for value in values for part in value.split(",") if part.strip()]


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
    parser.add_argument(
        "--link-gbit",
        action="append",
        default=[],
        metavar="R[,R...]",
        help="run over a real link shaped to R Gbit/s (repeatable, or a comma list): each participant "
        "in its own network namespace, tbf on each egress (root, ip and tc; CPU only)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    args = parser.parse_args(argv)
    title = f"Interconnect proof vs plain all-reduce ({args.world} participants)"
    if not args.link_gbit:
        figures = measure(
            args.world, args.mib, args.repeats, args.chunk_len, args.device, args.segment_chunks
        )
        emit(figures, args.json, title)
        return 0
    return _main_shaped(args, title)


def _refusal(rates: Sequence[float], given: Sequence[str], device: str) -> str | None:
    """What makes ``--link-gbit`` meaningless before anything is made (None: nothing)."""
    if not rates or min(rates) <= 0:
        return f"--link-gbit {','.join(given)}: want positive numbers (Gbit/s)"
    if device == "cuda":
        return "--device cuda: NCCL between GPUs does not cross the shaped link"
    return None


def _main_shaped(args: Any, title: str) -> int:
    """``--link-gbit``: a one-line error where it cannot run; the namespaces removed however it ends."""
    from compute.lab.report import emit
    from compute.localnet.netns import NetnsError, shaping_unavailable
    from compute.localnet.processes import signal_number, stop_on_signals

    try:
        rates = parse_rates(args.link_gbit)
    except ValueError:
        rates = []
    why = _refusal(rates, args.link_gbit, args.device) or shaping_unavailable()
    if why:
        print(f"bench interconnect --link-gbit: {why}", file=sys.stderr)
        return 2
    stop_on_signals()
    try:
        figures = measure_shaped(
            args.world, args.mib, args.repeats, args.chunk_len, args.segment_chunks, rates
        )
    except NetnsError as exc:
        print(f"bench interconnect --link-gbit: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as interrupt:
        print("bench interconnect --link-gbit: interrupted, namespaces removed", file=sys.stderr)
        return 128 + signal_number(interrupt)
    if args.json:
        emit(figures, True, title)
    for row in [] if args.json else figures["rates"]:
        emit(row, False, f"{title} over a link shaped to {row['link_gbit']} Gbit/s")
    return 0
