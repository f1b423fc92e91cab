"""The public machine feed: what this validator proved about each miner and how often it was there.

``MachineFeed`` (``machine_feed.v1``) is the JSON a renter, an aggregator or ``register.py
resources --feed`` reads at ``/api/public/v1/machines`` (signed with the validator's hotkey, see
``compute.transport.signed_json``), and ``/machines`` shows as a page. Per machine: its uid and
hotkey (public on chain; what a renter rents by), the GPUs and figures the validator proved on its
own clock (model, count, TFLOPS fp16/fp32, resident memory, bandwidth), when they were first and
last proven, and its verdict history: the last verdicts and per-day counts of this validator's
tests over 30 days, with uptime (tests passed / tests run) over 7 and 30 days; with collateral on,
the miner's standing deposit and pending reclaim as this validator last read them from the contract
(``compute.collateral.standing``), so a renter sees them before renting. Beside them, what the miner
said, each with when the validator last looked: its asking price, as it signed it in its latest
answer to this validator's availability probe (informational: no score reads it), and whether it
was free or rented then (``FeedNow``: the validator's latest test or probe, whichever is newer).

What it leaves out on purpose (nothing that helps an attacker or that the miner wrote): GPU UUIDs,
axon or lease endpoints, host keys, host names of multi-host miners (only how many were credited),
failure reasons (they quote miners and name internal addresses), shared-device evidence, scores.
Its fields are an allow-list (tests/dashboard/test_feed_offers.py): a new one is added on purpose.

Deliberately not here: reading the store (``compute.store.feed``), HTTP, rate limits.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from compute.collateral.standing import PublishedStanding
from compute.peertext import PeerText
from compute.store.feed import WINDOWS_DAYS, FeedHistory, MachineHistory
from compute.store.offers import Offer

Verdict = Literal["verified", "rented", "failed"]
Money = Annotated[float, Field(ge=0, le=1e6, allow_inf_nan=False)]
FEED_KIND: Final = "machine_feed.v1"


class _Model(BaseModel):
    # a newer validator may add fields: readers ignore what they do not know
    model_config = ConfigDict(frozen=True, extra="ignore")


class FeedWindow(_Model):
    """This validator's tests of the machine over the last ``days`` days."""

    days: int = Field(ge=1, le=366)
    tests: int = Field(ge=0, le=1_000_000)
    passed: int = Field(ge=0, le=1_000_000)
    rented: int = Field(ge=0, le=1_000_000)  # passed while its GPUs were under a verified rental
    uptime: float | None = Field(None, ge=0, le=1)  # passed / tests (None: not tested)


class FeedVerdict(_Model):
    at: int = Field(ge=0)  # Unix seconds
    verdict: Verdict


class FeedCollateral(_Model):
    """The miner's collateral as this validator last read it from the contract (TAO)."""

    standing_tao: float = Field(ge=0)  # deposit less a pending reclaim
    pending_reclaim_tao: float = Field(0.0, ge=0)
    reclaim_at: int | None = Field(None, ge=0)  # chain time the pending reclaim matures
    read_at: float = Field(ge=0)


class FeedPrice(_Model):
    """The asking price per hour the miner signed in its latest answer to this validator's
    availability probe (``seen_at``): ``base_hour`` per lease plus ``gpu_hour`` per GPU, by the GPU
    names it reports. What the miner says, shown as such: no score reads it."""

    currency: Annotated[str, PeerText(8)] = "USD"
    base_hour: Money = 0.0
    gpu_hour: dict[Annotated[str, PeerText(128)], Money] = Field(default_factory=dict, max_length=64)
    seen_at: float = Field(ge=0)

    def hourly(self, gpu_count: int) -> float | None:
        """A lease of ``gpu_count`` GPUs at the dearest GPU price it names (None: it names none)."""
        if gpu_count and not self.gpu_hour:
            return None
        return round(self.base_hour + gpu_count * max(self.gpu_hour.values(), default=0.0), 6)


class FeedNow(_Model):
    """Free or rented when this validator last looked (``seen_at``; the age is ``generated_at`` less
    it): ``source`` "test", its own test found the GPUs under a verified rental or not; "probe", the
    miner's answer to its availability probe (active leases, ``free_gpus``)."""

    state: Literal["free", "partly rented", "rented"]
    source: Literal["test", "probe"]
    seen_at: float = Field(ge=0)
    free_gpus: int | None = Field(None, ge=0, le=1024)  # probe only: the GPUs it said were free


class FeedMachine(_Model):
    uid: int = Field(ge=0, le=65535)
    hotkey: Annotated[str, PeerText(64)]
    gpu_model: Annotated[str, PeerText(128)] | None = None  # as the validator identified it
    gpu_count: int = Field(0, ge=0, le=1024)
    tflops_fp16: float | None = Field(None, ge=0)
    tflops_fp32: float | None = Field(None, ge=0)
    memory_gb: float | None = Field(None, ge=0)  # proven resident, per GPU
    bandwidth_gbs: float | None = Field(None, ge=0)
    hosts_credited: int | None = Field(None, ge=0, le=64)  # multi-host miners: hosts proven alone
    first_proven_at: float | None = Field(None, ge=0)
    last_proven_at: float | None = Field(None, ge=0)  # the figures above are from this test
    last_passed_at: float | None = Field(None, ge=0)
    windows: list[FeedWindow] = Field(default_factory=list, max_length=8)
    daily: list[Annotated[list[int], Field(min_length=2, max_length=2)]] = Field(
        default_factory=list, max_length=366
    )  # [tests, passed] per UTC day, the oldest first (the last: today so far)
    recent: list[FeedVerdict] = Field(default_factory=list, max_length=256)  # the newest last
    collateral: FeedCollateral | None = None  # none: collateral off, or this miner not read
    price: FeedPrice | None = None  # none: never probed, or it names no price
    now: FeedNow | None = None  # none: never tested nor probed

    def window(self, days: int) -> FeedWindow | None:
        return next((w for w in self.windows if w.days == days), None)


class MachineFeed(_Model):
    kind: Literal["machine_feed.v1"] = "machine_feed.v1"
    validator: Annotated[str, PeerText(64)] | None = None  # the hotkey that signs it (None: unsigned)
    generated_at: float = Field(ge=0)
    machines: list[FeedMachine] = Field(default_factory=list, max_length=65_536)


def _window(history: MachineHistory, days: int) -> FeedWindow:
    counts = history.window(days)
    uptime = round(counts.passed / counts.tested, 4) if counts.tested else None
    return FeedWindow(
        days=days, tests=counts.tested, passed=counts.passed, rented=counts.rented, uptime=uptime
    )


def feed_collateral(standing: PublishedStanding) -> FeedCollateral:
    return FeedCollateral(
        standing_tao=max(0, standing.deposit_wei - standing.pending_reclaim_wei) / 10**18,
        pending_reclaim_tao=standing.pending_reclaim_wei / 10**18,
        reclaim_at=standing.reclaim_at or None,
        read_at=standing.read_at,
    )


def feed_price(offer: Offer | None) -> FeedPrice | None:
    """The price the miner signed in ``offer`` (None: none, or unreadable)."""
    if offer is None or not offer.price_json:
        return None
    try:
        data = json.loads(offer.price_json)
        return FeedPrice.model_validate({**data, "seen_at": offer.at}) if isinstance(data, dict) else None
    except ValueError:  # pydantic's ValidationError is a ValueError
        return None


def feed_now(history: MachineHistory) -> FeedNow | None:
    """The newer of the validator's latest passing test (rented or not) and its latest probe."""
    tested = next(((at, v) for at, v in reversed(history.recent) if v != "failed"), None)
    now = None
    if tested is not None:
        at, verdict = tested
        now = FeedNow(state="rented" if verdict == "rented" else "free", source="test", seen_at=at)
    offer = history.offer
    if offer is not None and (offer.active_leases is not None or offer.free_gpus is not None):
        if now is None or offer.at > now.seen_at:
            if not offer.active_leases:
                state = "free" if offer.active_leases == 0 or offer.free_gpus else "rented"
            else:
                state = "partly rented" if offer.free_gpus else "rented"
            free = offer.free_gpus if offer.free_gpus is None else min(offer.free_gpus, 1024)
            now = FeedNow(state=state, source="probe", seen_at=offer.at, free_gpus=free)  # type: ignore[arg-type]
    return now


def feed_machine(history: MachineHistory, standing: PublishedStanding | None = None) -> FeedMachine:
    proven = history.proven
    model = Counter(proven.models).most_common(1)[0][0] if proven is not None and proven.models else None
    return FeedMachine(
        uid=history.uid,
        hotkey=history.hotkey,
        gpu_model=model,
        gpu_count=proven.gpu_count if proven is not None else 0,
        tflops_fp16=proven.tflops_fp16 if proven is not None else None,
        tflops_fp32=proven.tflops_fp32 if proven is not None else None,
        memory_gb=proven.mem_proven_gb if proven is not None else None,
        bandwidth_gbs=proven.mem_gbs if proven is not None else None,
        hosts_credited=sum(1 for s in proven.hosts.values() if s > 0)
        if proven is not None and proven.hosts
        else None,
        first_proven_at=history.first_proven,
        last_proven_at=proven.created if proven is not None else None,
        last_passed_at=history.last_passed,
        windows=[_window(history, days) for days in WINDOWS_DAYS if days <= len(history.days)],
        daily=[[d.tested, d.passed] for d in reversed(history.days)],
        recent=[FeedVerdict(at=int(at), verdict=verdict) for at, verdict in history.recent],  # type: ignore[arg-type]
        collateral=feed_collateral(standing) if standing is not None else None,
        price=feed_price(history.offer),
        now=feed_now(history),
    )


def build_feed(
    history: FeedHistory,
    validator: str | None = None,
    standing: Mapping[str, PublishedStanding] | None = None,
) -> MachineFeed:
    """The public feed of a store's history (``validator``: the hotkey that will sign it;
    ``standing``: the collateral it last read, per hotkey)."""
    standing = standing or {}
    return MachineFeed(
        validator=validator,
        generated_at=history.generated,
        machines=[feed_machine(m, standing.get(m.hotkey)) for m in history.machines],
    )


__all__ = [
    "FEED_KIND",
    "FeedCollateral",
    "FeedMachine",
    "FeedNow",
    "FeedPrice",
    "FeedVerdict",
    "FeedWindow",
    "MachineFeed",
    "build_feed",
    "feed_machine",
]
