"""A lost allocate answer is asked again with the same idempotency key: one lease, never two.

The miner (real app, embedded backend, real HTTP on 127.0.0.1) takes longer to start the first
lease than the renter waits; register.py's call times out, and it asks the same miner again with the
same key instead of moving on, so the miner answers "starting" and then the lease it already made.
"""

from __future__ import annotations

import io
import json

import pytest

from compute.allocation import LeaseStore
from compute.operator import EXIT_OK, main


def _allocate(subnet, timeout_s: str) -> tuple[int, dict]:
    flags = subnet.flags("operator_a")
    flags[flags.index("--register.timeout") + 1] = timeout_s
    out, err = io.StringIO(), io.StringIO()
    argv = [*flags, "allocate", "--uid", str(subnet.miner_uid), "--duration", "30m", "--json"]
    code = main(argv, stdout=out, stderr=err)
    return code, json.loads(out.getvalue())


@pytest.mark.slow
def test_a_timed_out_allocation_is_retried_with_one_key_and_makes_one_lease(subnet, slow_first_start):
    code, body = _allocate(subnet, "1")
    assert code == EXIT_OK, body
    live = LeaseStore(subnet.root / "miner" / "leases.db").live()
    assert [s.lease_id for s in live] == [body["lease"]["lease_id"]]  # one lease, the one in the book
    assert len(slow_first_start) == 1  # the retries were answered from the first attempt's lease
    assert subnet.cli("operator_a", "deallocate", body["lease"]["lease_id"])[0] == EXIT_OK
