"""Gas per collateral operation, measured on the in-process EVM with the real bytecode.

``python -m compute bench collateral-gas [--json] [--bench.validators N]``: deploys the production
stake source over the precompile doubles and the contract, then a miner deposits and tops up,
N validators of equal stake attest a failed rental until the quorum (kappa = 1/2) executes the
slash, the renter claims, and the miner reclaims. Gas is what the receipts say (py-evm's EVM,
the same schedule subtensor's Frontier EVM charges for these opcodes); the doubles' reads cost
less than the real precompiles, whose own cost the docs list separately.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from compute.collateral.chain import KIND_FAILED_RENTAL, CollateralConfig, SlashProposal
from compute.collateral.deploy import deploy_stack
from compute.collateral.devchain import local_chain
from compute.collateral.identity import machine_id

TAO = 10**18


def run(validators: int = 5) -> dict[str, Any]:
    from bittensor.sp_core import Keypair

    chain = local_chain()
    config = CollateralConfig(
        rate_per_gpu_day=TAO, min_deposit=TAO // 10, reclaim_delay_s=3600, proposal_ttl_s=1800
    )
    stack = deploy_stack(chain.w3, chain.accounts[0], config, 27, doubles=True)
    assert stack.mirror is not None
    miner = Keypair.create_from_uri("//bench-miner")
    miner_evm = chain.new_account(100 * TAO)
    stack.mirror.set_neuron(0, miner.ss58_address, 0, False)
    stack.mirror.associate(miner_evm.address, 0)
    voters = []
    for index in range(validators):
        keypair = Keypair.create_from_uri(f"//bench-validator-{index}")
        account = chain.new_account()
        stack.mirror.set_neuron(index + 1, keypair.ss58_address, 1000, True)
        stack.mirror.associate(account.address, index + 1)
        voters.append(stack.client(chain.w3, account))
    renter = chain.new_account()
    client = stack.client(chain.w3, miner_evm)
    machine = machine_id([f"GPU-bench-{i}" for i in range(8)])
    gas: dict[str, Any] = {"deploy": stack.gas}
    gas["deposit_first"] = client.deposit(machine, 10 * TAO).gas_used
    gas["deposit_topup"] = client.deposit(machine, 2 * TAO).gas_used
    proposal = SlashProposal(
        miner.ss58_address, machine, KIND_FAILED_RENTAL, b"\x42" * 32, 8, renter.address.lower()
    )
    attests = []
    for voter in voters:
        attests.append(voter.attest(proposal))
        if attests[-1].event("Slashed"):
            break
    slashing = len(attests) - 1
    gas["attest_first"] = attests[0].gas_used
    gas["attest_more"] = attests[1].gas_used if slashing > 1 else None
    gas["attest_that_slashes"] = attests[slashing].gas_used
    gas["attesters_at_quorum"] = slashing + 1
    gas["claim"] = stack.client(chain.w3, renter).claim().gas_used
    gas["reclaim_request"] = client.request_reclaim(miner.ss58_address, machine, 2 * TAO).gas_used
    chain.advance(config.reclaim_delay_s + 1)
    gas["reclaim_finalize"] = client.finalize_reclaim(miner.ss58_address, machine).gas_used
    return {"validators": validators, "gas": gas, "slashed_wei": 8 * TAO}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m compute bench collateral-gas", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--bench.validators",
        dest="validators",
        type=int,
        default=5,
        help="validators of equal stake attesting (default 5)",
    )
    args = parser.parse_args(argv)
    if not 1 <= args.validators <= 64:
        sys.stderr.write("error: --bench.validators must be in 1..64\n")
        return 2
    result = run(args.validators)
    if args.json:
        sys.stdout.write(json.dumps(result) + "\n")
        return 0
    rows = [(k, v) for k, v in result["gas"].items() if k != "deploy"]
    rows += [(f"deploy {k}", v) for k, v in result["gas"]["deploy"].items()]
    for name, value in rows:
        sys.stdout.write(f"{name:<32} {value if value is not None else '-':>10}\n")
    return 0
