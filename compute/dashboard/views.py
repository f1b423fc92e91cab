"""The public view of a dashboard snapshot: what anyone who reaches the page may see.

Verdicts, proven figures, scores and weights are what the validator publishes anyway (its weights
are on chain). What it learnt *about the machines* is not: GPU UUIDs, the SSH endpoints and host
keys of its validation leases, and the evidence that ties several hotkeys to one device. They are
kept for the validator's operator (``--dashboard.full``) and scrubbed here otherwise: UUIDs and
timings are dropped, and every reason loses addresses, host keys, UUIDs and the shared-device
evidence (the verdict "shared device: same machine as uid N" stays).

Pure functions over the store's values; no I/O.
"""

from __future__ import annotations

import re
from dataclasses import replace

from compute.store import MinerOverview, Overview, PogResult

_SCRUB = (
    (re.compile(r"(ssh-(ed25519|rsa|dss)|ecdsa-sha2-nistp\d+) [A-Za-z0-9+/=]{16,}"), "<host key>"),
    (re.compile(r"\bGPU-[0-9A-Za-z-]+"), "GPU-<uuid>"),
    (re.compile(r"\[[0-9A-Fa-f:.]+\](:\d+)?"), "<address>"),  # [ipv6]:port
    (re.compile(r"\b\d{1,3}(\.\d{1,3}){3}(:\d{1,5})?\b"), "<address>"),  # ipv4[:port]
    (re.compile(r"\b[0-9A-Fa-f]{0,4}(:[0-9A-Fa-f]{0,4}){2,7}\b"), "<address>"),  # bare ipv6
    (re.compile(r"\b[A-Za-z0-9][A-Za-z0-9.-]*\.[A-Za-z]{2,}(:\d{1,5})?\b"), "<address>"),  # host.name[:port]
    (re.compile(r"\b[A-Za-z0-9][A-Za-z0-9.-]*:\d{2,5}\b"), "<address>"),  # host:port
)


def public_reason(reason: str) -> str:
    """``reason`` without endpoints, host keys, GPU UUIDs or shared-device evidence."""
    if reason.startswith("shared device"):
        reason = reason.split(" (", 1)[0] + reason.split(")", 1)[1] if ")" in reason else reason
    for pattern, shown in _SCRUB:
        reason = pattern.sub(shown, reason)
    return reason


def public_result(result: PogResult | None) -> PogResult | None:
    if result is None:
        return None
    return replace(result, reasons=tuple(public_reason(r) for r in result.reasons), gpu_uuids=(), timings={})


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
    return replace(snapshot, miners=miners)


__all__ = ["public_overview", "public_reason", "public_result"]
