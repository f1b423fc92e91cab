"""A signed request kept as a record (a receipt) verifies by its signature alone, years later."""

from __future__ import annotations

import time

import pytest
from bittensor import http_auth

from compute.transport import KeptRequestError, verify_kept_request

PATH = "/v1/allocate"
OTHER = "5FHneW46xGXgs5mUiveU4sbTyGBzmstUspZC92UhjJM694ty"  # a well-known dev address


def _signed(wallet, receiver: str, body: str) -> dict[str, str]:
    return dict(http_auth.sign(wallet, method="POST", path=PATH, body=body.encode(), receiver_ss58=receiver))


def test_an_old_request_verifies_by_its_signature_and_names_its_signer(make_wallet) -> None:
    renter, miner = make_wallet("renter"), make_wallet("miner")
    receiver = miner.hotkey.ss58_address
    headers = _signed(renter, receiver, '{"gpus": 1}')
    signer, nonce = verify_kept_request(headers, '{"gpus": 1}', PATH, receiver)
    assert signer == renter.hotkey.ss58_address
    assert abs(nonce / 1e9 - time.time()) < 60
    # checked again (a receipt is re-read every round): no replay store refuses it
    assert verify_kept_request(headers, '{"gpus": 1}', PATH, receiver)[0] == signer


@pytest.mark.parametrize(
    "edit, reason",
    [
        (lambda h, b, r: (h, '{"gpus": 8}', r), "does not verify"),  # body edited after signing
        (lambda h, b, r: (h, b, OTHER), "does not verify"),  # presented as addressed to another miner
        (lambda h, b, r: ({k: v for k, v in h.items() if "Nonce" not in k}, b, r), "no valid nonce"),
        (lambda h, b, r: ({**h, http_auth.HEADER_NONCE: "soon"}, b, r), "no valid nonce"),
        (lambda h, b, r: ({**h, http_auth.HEADER_SIGNATURE: "00" * 64}, b, r), "does not verify"),
    ],
)
def test_an_edited_request_is_refused_with_its_reason(make_wallet, edit, reason) -> None:
    miner = make_wallet("miner")
    receiver = miner.hotkey.ss58_address
    headers, body, to = edit(_signed(make_wallet("renter"), receiver, '{"gpus": 1}'), '{"gpus": 1}', receiver)
    with pytest.raises(KeptRequestError, match=reason):
        verify_kept_request(headers, body, PATH, to)
