"""``allocate --ttl/--until/--idle-after`` and ``extend --until`` against the real miner.

The term is the miner's own expiry (its clock ends the lease); the idle stop is signed into the
allocate request, watched by the miner's idle watch (run here with a fake wall clock over real
activity) and shown to the renter by ``status``/``list``.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta, timezone

import pytest
from shellflow import cli

from compute.allocation import IdleWatch
from compute.operator import EXIT_OK, EXIT_USAGE, UsageError
from compute.operator.commands import parse_duration, parse_until


def test_ttl_and_until_set_the_lease_term_the_miner_enforces(subnet):
    code, body = cli(subnet, "operator_a", "allocate", "--uid", str(subnet.miner_uid), "--ttl", "2h")
    assert code == EXIT_OK, body
    lease = body["lease"]
    assert lease["expires_at"] - lease["created_at"] == pytest.approx(7200, abs=1)
    until = int(time.time()) + 5400
    code, body = cli(subnet, "operator_a", "allocate", "--uid", str(subnet.miner_uid), "--until", str(until))
    assert code == EXIT_OK and body["lease"]["expires_at"] == pytest.approx(until, abs=2), body
    later = datetime.fromtimestamp(until, timezone.utc) + timedelta(hours=3)
    code, body = cli(subnet, "operator_a", "extend", body["lease"]["lease_id"], "--until", later.isoformat())
    assert code == EXIT_OK and body["lease"]["expires_at"] == pytest.approx(later.timestamp(), abs=2), body
    for args in (
        ("--ttl", "2h", "--hours", "1"),
        ("--until", "2001-01-01T00:00Z"),
        ("--idle-after", "5m"),
        ("--until", "next tuesday"),
        ("--ttl", "soon"),
    ):
        code, body = cli(subnet, "operator_a", "allocate", "--uid", str(subnet.miner_uid), *args)
        assert code == EXIT_USAGE, (args, body)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1767225600", 1767225600.0),
        ("2026-01-01T00:00:00Z", 1767225600.0),
        ("2026-01-01T02:00+02:00", 1767225600.0),
    ],
)
def test_until_reads_unix_and_iso_times(text, expected):
    assert parse_until(text, now=1_700_000_000.0) == expected


def test_until_hh_mm_is_the_next_such_local_time():
    now = datetime(2026, 5, 1, 20, 0).astimezone().timestamp()
    assert parse_until("21:30", now) - now == pytest.approx(5400)
    assert parse_until("19:00", now) - now == pytest.approx(23 * 3600)  # tomorrow
    with pytest.raises(UsageError):
        parse_until("25:00", now)
    assert parse_duration(None, None, until="21:30", now=now) == 5400


@pytest.mark.slow
def test_idle_stop_is_signed_watched_and_shown_to_the_renter(subnet):
    code, body = cli(
        subnet, "operator_a", "allocate", "--uid", str(subnet.miner_uid), "--ttl", "6h", "--idle-after", "10m"
    )
    assert code == EXIT_OK, body
    lease_id = body["lease"]["lease_id"]
    assert body["lease"]["requirements"]["idle_stop_s"] == 600
    assert body["lease"]["idle"] == {
        "stop_after_s": 600,
        "idle_since": None,
        "checked_at": None,
        "seen": "",
        "stopped": False,
    }
    manager = subnet.monitor.manager
    receipts = asyncio.run(_receipts(manager))
    assert lease_id in receipts and '"idle_stop_s":600' in receipts[lease_id]  # in the signed request
    now = [time.time()]
    watch = IdleWatch(manager, clock=lambda: now[0])
    assert asyncio.run(watch.check_once()) == []
    now[0] += 300
    time.sleep(1.0)
    assert asyncio.run(watch.check_once()) == []
    code, body = cli(subnet, "operator_a", "status", lease_id)
    assert body["lease"]["idle"]["idle_since"] is not None and body["lease"]["idle"]["seen"] == "idle"
    now[0] += 300
    time.sleep(1.0)
    assert asyncio.run(watch.check_once()) == [lease_id]
    code, body = cli(subnet, "operator_a", "list", "--refresh", "--all")
    ended = next(entry for entry in body["leases"] if entry["lease_id"] == lease_id)
    assert ended["state"] == "expired" and ended["idle"]["stopped"] is True
    assert lease_id not in asyncio.run(_receipts(manager))  # no receipt left: validators stop crediting it


async def _receipts(manager) -> dict[str, str]:
    from compute.miner.receipts import rental_receipts

    return {r.lease_id: r.request.body for r in await rental_receipts(manager)}
