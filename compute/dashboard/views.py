"""The public view of a dashboard snapshot: what anyone who reaches the page may see.

Verdicts, proven figures, scores and weights are what the validator publishes anyway (its weights
are on chain), and what a renter may know about a machine. What it learnt *about the machines* is
not, nor anything a cheater could tune its cheat against: GPU UUIDs, the SSH endpoints and host keys
of its validation leases, the evidence that ties several hotkeys to one device (which uids share a
device), timings, and the hotkeys its canaries are signed by. They are kept for the validator's
operator (the private view, ``compute.dashboard.private``: only to requests signed by the
validator's own hotkey).

The public view is a list of what may be shown (``PUBLIC_RESULT_FIELDS``), not of what may not: a
field added to ``PogResult`` later is private until it is added here. Every reason loses addresses,
host keys, UUIDs, hotkeys and the shared-device evidence (the verdict "shared device" stays, not
which miner it was tied to).

Pure functions over the store's values; no I/O.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from compute.store import MinerOverview, Overview, PogResult

PUBLIC_RESULT_FIELDS = (
    "round_id",
    "uid",
    "hotkey",
    "ok",
    "sample",
    "reasons",
    "models",
    "tflops_fp16",
    "tflops_fp32",
    "gpu_count",
    "rented",
    "block",
    "created",
    "mem_gbs",
    "mem_proven_gb",
    "sustained_ratio",
    "sustained_factor",
    "scaling_efficiency",
    "credited_gpus",
    "host",
    "depth_round",
    "history_reset",
    "rented_fraction",
    "availability",
    "rental_uptime",
    "hosts",
)
SHARED_DEVICE = "shared device: credited once, on another miner"

_SCRUB = (
    (re.compile(r"(ssh-(ed25519|rsa|dss)|ecdsa-sha2-nistp\d+) [A-Za-z0-9+/=]{16,}"), "<host key>"),
    (re.compile(r"\bGPU-[0-9A-Za-z-]+"), "GPU-<uuid>"),
    (re.compile(r"\b5[1-9A-HJ-NP-Za-km-z]{47}\b"), "<hotkey>"),  # ss58: canary signers, renters
    (re.compile(r"\b0x[0-9A-Fa-f]{40}\b"), "<address>"),  # EVM addresses
    (re.compile(r"\[[0-9A-Fa-f:.]+\](:\d+)?"), "<address>"),  # [ipv6]:port
    (re.compile(r"\b\d{1,3}(\.\d{1,3}){3}(:\d{1,5})?\b"), "<address>"),  # ipv4[:port]
    (re.compile(r"\b[0-9A-Fa-f]{0,4}(:[0-9A-Fa-f]{0,4}){2,7}\b"), "<address>"),  # bare ipv6
    (re.compile(r"\b[A-Za-z0-9][A-Za-z0-9.-]*\.[A-Za-z]{2,}(:\d{1,5})?\b"), "<address>"),  # host.name[:port]
    (re.compile(r"\b[A-Za-z0-9][A-Za-z0-9.-]*:\d{2,5}\b"), "<address>"),  # host:port
)


def public_reason(reason: str) -> str:
    """``reason`` without endpoints, host keys, GPU UUIDs, hotkeys or shared-device evidence."""
    if reason.startswith("shared device"):
        return SHARED_DEVICE  # not which miner, nor why: that is the validator's evidence
    for pattern, shown in _SCRUB:
        reason = pattern.sub(shown, reason)
    return reason


def public_result(result: PogResult | None) -> PogResult | None:
    """``result`` with its public fields only (every other field at its default: nothing)."""
    if result is None:
        return None
    kept: dict[str, Any] = {name: getattr(result, name) for name in PUBLIC_RESULT_FIELDS}
    kept["reasons"] = tuple(public_reason(r) for r in result.reasons)
    return PogResult(**kept)


def public_overview(snapshot: Overview) -> Overview:
    """``snapshot`` as anyone may see it (see the module docstring)."""
    miners = tuple(
        MinerOverview(
            m.uid,
            m.hotkey,
            m.score,
            m.weight,
            public_result(m.latest),
            public_result(m.verified),
        )
        for m in snapshot.miners
    )
    return dataclasses.replace(snapshot, miners=miners)


def _result_json(result: PogResult | None) -> dict[str, Any] | None:
    if result is None:
        return None
    return {name: value for name, value in dataclasses.asdict(result).items() if name in PUBLIC_RESULT_FIELDS}


def public_json(snapshot: Overview) -> dict[str, Any]:
    """The public view as JSON-ready data: each result carries its public fields and no others."""
    shown = public_overview(snapshot)
    body = dataclasses.asdict(shown)
    body["miners"] = [
        {**dataclasses.asdict(m), "latest": _result_json(m.latest), "verified": _result_json(m.verified)}
        for m in shown.miners
    ]
    return body


__all__ = ["PUBLIC_RESULT_FIELDS", "public_json", "public_overview", "public_reason", "public_result"]
