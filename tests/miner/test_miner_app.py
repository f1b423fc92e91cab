"""The miner API end to end: signed transport, access policy, manager, embedded SSH backend."""

from __future__ import annotations

import asyncio
import socket

import asyncssh
import pytest
from minerkit import H100, new_renter_key, ssh_run

from compute.protocol import (
    AllocateRequest,
    CheckAvailabilityRequest,
    DeallocateRequest,
    ErrorCode,
    ExchangeKeyRequest,
    ExtendLeaseRequest,
    HealthRequest,
    LeaseStatusRequest,
    ListLeasesRequest,
    Requirements,
    RestartLeaseRequest,
    SpecsRequest,
)
from compute.transport import Rejected


def allocate(key, gpus: int = 1, duration_s: int = 3600, **req) -> AllocateRequest:
    return AllocateRequest(
        requirements=Requirements(gpu_count=gpus, **req),
        duration_s=duration_s,
        ssh_public_key=key.public_line,
    )


async def test_allocate_ssh_run_deallocate_closes_listener(miner, clients):
    client, key = clients["validator"], new_renter_key()
    lease = (await client.call(miner.endpoint, miner.hotkey, allocate(key))).lease
    assert (lease.state, lease.gpus, lease.owner_hotkey) == ("active", [H100], client.hotkey)
    result = await ssh_run(lease.ssh, key, "echo ok; echo $CUDA_VISIBLE_DEVICES")
    assert result.stdout == "ok\n0\n"
    gone = await client.call(miner.endpoint, miner.hotkey, DeallocateRequest(lease_id=lease.lease_id))
    assert gone.lease_id == lease.lease_id
    with pytest.raises(OSError):
        socket.create_connection((lease.ssh.host, lease.ssh.port), timeout=1).close()
    status = (
        await client.call(miner.endpoint, miner.hotkey, LeaseStatusRequest(lease_id=lease.lease_id))
    ).lease
    assert (status.state, status.ssh) == ("released", None)


async def test_stranger_cannot_touch_anothers_lease(miner, clients):
    key = new_renter_key()
    lease = (await clients["validator"].call(miner.endpoint, miner.hotkey, allocate(key))).lease
    lid = lease.lease_id
    for request in (
        DeallocateRequest(lease_id=lid),
        ExtendLeaseRequest(lease_id=lid, duration_s=600),
        ExchangeKeyRequest(lease_id=lid, ssh_public_key=new_renter_key().public_line),
        RestartLeaseRequest(lease_id=lid),
        LeaseStatusRequest(lease_id=lid),
    ):
        with pytest.raises(Rejected) as refused:
            await clients["stranger"].call(miner.endpoint, miner.hotkey, request)
        assert (refused.value.status, refused.value.code) == (403, ErrorCode.NOT_OWNER)
    assert (await clients["stranger"].call(miner.endpoint, miner.hotkey, ListLeasesRequest())).leases == []
    assert (await ssh_run(lease.ssh, key, "echo still-mine")).stdout == "still-mine\n"


async def test_unregistered_hotkey_is_forbidden(miner, clients):
    with pytest.raises(Rejected) as refused:
        await clients["nobody"].call(miner.endpoint, miner.hotkey, HealthRequest())
    assert (refused.value.status, refused.value.code) == (403, ErrorCode.FORBIDDEN)


async def test_exchange_key_refuses_old_key_and_accepts_new(miner, clients):
    old, new = new_renter_key(), new_renter_key()
    lease = (await clients["validator"].call(miner.endpoint, miner.hotkey, allocate(old, gpus=0))).lease
    await clients["validator"].call(
        miner.endpoint,
        miner.hotkey,
        ExchangeKeyRequest(lease_id=lease.lease_id, ssh_public_key=new.public_line),
    )
    with pytest.raises(asyncssh.PermissionDenied):
        await ssh_run(lease.ssh, old, "true")
    assert (await ssh_run(lease.ssh, new, "echo new")).stdout == "new\n"


async def test_concurrent_allocations_for_last_gpu_have_one_winner(miner, clients):
    tries = [
        clients[n].call(miner.endpoint, miner.hotkey, allocate(new_renter_key()))
        for n in ("validator", "stranger", "validator", "stranger")
    ]
    results = await asyncio.gather(*tries, return_exceptions=True)
    winners = [r for r in results if not isinstance(r, Exception)]
    losers = [r for r in results if isinstance(r, Rejected)]
    assert len(winners) == 1 and len(losers) == 3
    assert {(r.status, r.code) for r in losers} == {(409, ErrorCode.NO_CAPACITY)}
    health = await clients["validator"].call(miner.endpoint, miner.hotkey, HealthRequest())
    assert (health.free_gpus, health.active_leases, health.backend) == (0, 1, "embedded")


async def test_validation_lease_without_gpus_shares_a_rented_machine(miner, clients):
    await clients["stranger"].call(miner.endpoint, miner.hotkey, allocate(new_renter_key()))
    key = new_renter_key()
    request = AllocateRequest(
        requirements=Requirements(gpu_count=0),
        duration_s=600,
        ssh_public_key=key.public_line,
        purpose="validation",
    )
    lease = (await clients["validator"].call(miner.endpoint, miner.hotkey, request)).lease
    assert (lease.purpose, lease.gpus) == ("validation", [])
    assert (await ssh_run(lease.ssh, key, "echo -n $CUDA_VISIBLE_DEVICES")).stdout == ""
    refused = await clients["validator"].call(
        miner.endpoint, miner.hotkey, CheckAvailabilityRequest(requirements=Requirements(gpu_count=1))
    )
    assert (refused.available, refused.free_gpus) == (False, 0)


@pytest.mark.parametrize(
    ("requirements", "duration_s", "key", "status", "code", "says"),
    [
        ({"gpu_count": 2}, 3600, None, 409, ErrorCode.UNSUPPORTED, "this machine rents out 1"),
        ({"gpu_count": 1, "gpu_model": "A100"}, 3600, None, 409, ErrorCode.UNSUPPORTED, "H100"),
        ({"gpu_count": 1, "memory_gb": 64}, 3600, None, 409, ErrorCode.UNSUPPORTED, "at most 8"),
        ({"gpu_count": 1, "cpu_count": 64}, 3600, None, 409, ErrorCode.UNSUPPORTED, "at most 4 per lease"),
        ({"gpu_count": -1}, 3600, None, 422, ErrorCode.INVALID_REQUEST, "requirements.gpu_count"),
        ({"memory_gb": -5}, 3600, None, 422, ErrorCode.INVALID_REQUEST, "requirements.memory_gb"),
        ({}, 10**9, None, 422, ErrorCode.INVALID_REQUEST, "duration_s"),
        ({}, 30 * 86400, None, 400, ErrorCode.INVALID_REQUEST, "maximum of 604800s"),
        (
            {},
            3600,
            "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ== me",
            400,
            ErrorCode.INVALID_REQUEST,
            "ssh_public_key",
        ),
        ({}, 3600, "rm -rf /", 422, ErrorCode.INVALID_REQUEST, "ssh_public_key"),
    ],
)
async def test_bad_requirements_get_clear_errors(
    miner, clients, requirements, duration_s, key, status, code, says
):
    request = AllocateRequest.model_construct(
        requirements=Requirements.model_construct(**{**Requirements().model_dump(), **requirements}),
        duration_s=duration_s,
        ssh_public_key=key or new_renter_key().public_line,
        purpose="rental",
        kind="allocate",
        protocol_version=1,
    )
    with pytest.raises(Rejected) as refused:
        await clients["validator"].call(miner.endpoint, miner.hotkey, request)
    assert (refused.value.status, refused.value.code) == (status, code)
    assert says in refused.value.reason


async def test_extend_restart_and_list_own_leases(miner, clients):
    client, key = clients["validator"], new_renter_key()
    lease = (await client.call(miner.endpoint, miner.hotkey, allocate(key, gpus=0))).lease
    extended = (
        await client.call(
            miner.endpoint, miner.hotkey, ExtendLeaseRequest(lease_id=lease.lease_id, duration_s=600)
        )
    ).lease
    assert extended.expires_at == pytest.approx(lease.expires_at + 600)
    restarted = (
        await client.call(miner.endpoint, miner.hotkey, RestartLeaseRequest(lease_id=lease.lease_id))
    ).lease
    assert restarted.ssh == lease.ssh
    assert (await ssh_run(lease.ssh, key, "echo up")).stdout == "up\n"
    listed = (await client.call(miner.endpoint, miner.hotkey, ListLeasesRequest())).leases
    assert [entry.lease_id for entry in listed] == [lease.lease_id]


async def test_specs_report_rentable_gpus(miner, clients):
    specs = (await clients["validator"].call(miner.endpoint, miner.hotkey, SpecsRequest())).specs
    assert (specs.gpus, specs.backend) == ([H100], "embedded")


async def test_unknown_lease_is_not_found(miner, clients):
    with pytest.raises(Rejected) as refused:
        await clients["validator"].call(miner.endpoint, miner.hotkey, LeaseStatusRequest(lease_id="0" * 32))
    assert (refused.value.status, refused.value.code) == (404, ErrorCode.LEASE_NOT_FOUND)
