"""Shared pieces of the transport tests: test models, a test server, chain snapshots."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from compute.chain import MetagraphSnapshot, NeuronInfo
from compute.protocol import RequestFailed
from compute.transport import AccessPolicy, KeyWallet, ServerLimits, SignedServer


class EchoRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(max_length=1000)
    count: int = Field(1, ge=1, le=10)


class EchoResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str
    caller: str


def neuron(uid: int, wallet: KeyWallet, stake: float, permit: bool = True) -> NeuronInfo:
    assert wallet.coldkeypub is not None
    return NeuronInfo(
        uid=uid,
        hotkey=wallet.ss58,
        coldkey=wallet.coldkeypub.ss58_address,
        stake=stake,
        validator_permit=permit,
        axon=None,
        active=True,
        last_update=0,
    )


def snapshot(*neurons: NeuronInfo, netuid: int = 27, block: int = 100) -> MetagraphSnapshot:
    return MetagraphSnapshot(netuid=netuid, block=block, neurons=tuple(neurons))


def build_server(
    miner: KeyWallet, policy: AccessPolicy | None, limits: ServerLimits | None = None
) -> SignedServer:
    server = SignedServer(miner.keypair, policy, limits or ServerLimits(rate_per_s=1000, burst=1000))

    @server.route("/echo", EchoRequest, EchoResponse)
    async def echo(req: EchoRequest, caller) -> EchoResponse:
        if req.text == "refuse":
            raise RequestFailed("no_capacity", "no GPU free right now", status=409)
        if req.text == "crash":
            raise RuntimeError("secret internal detail")
        return EchoResponse(text=req.text * req.count, caller=caller.hotkey_ss58)

    return server
