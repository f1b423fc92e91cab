"""Gas per collateral operation, measured on the in-process EVM with the real bytecode.

``python -m compute bench collateral-gas [--json] [--bench.validators N]``: deploys the production
stake source over the precompile doubles and the contract (production windows), then a miner
deposits and tops up, N validators of equal stake attest a failed rental until the quorum
(kappa = 1/2) executes the slash (the first attestation opens the proposal with its bond), the
renter and the opener claim, the miner reclaims, and a proposal nobody follows expires, is opened
again and closed. Gas is what the receipts say (py-evm's EVM, the same schedule subtensor's
Frontier EVM charges for these opcodes); the doubles' reads cost less than the real precompiles,
whose own cost the docs list separately. Each figure is printed beside the one measured before
incidents, per-hotkey deposits and bonds (``BASELINE``, 5 validators; 64: ``BASELINE_64``) and
their ratio.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from compute.collateral.chain import KIND_CHEAT, KIND_FAILED_RENTAL, CollateralConfig, SlashProposal
from compute.collateral.deploy import deploy_stack
from compute.collateral.devchain import local_chain
from compute.collateral.windows import DEFAULT_PROPOSAL_TTL_S, DEFAULT_RECLAIM_DELAY_S

TAO = 10**18
# Measured before a slash was keyed by its incident, deposits by hotkey and openings bonded (the
# contract as of the collateral that made renters whole, same chain, same schedule).
BASELINE = {
    "deposit_first": 95_547,
    "deposit_topup": 58_189,
    "attest_first": 294_274,
    "attest_more": 140_814,
    "attest_that_slashes": 304_854,
    "claim": 32_453,
    "reclaim_request": 57_051,
    "reclaim_finalize": 45_358,
    "deploy_Collateral": 1_984_750,
}
BASELINE_64 = {**BASELINE, "attest_first": 573_203, "attest_that_slashes": 1_112_668}


def run(validators: int = 5) -> dict[str, Any]:
    from bittensor.sp_core import Keypair

    chain = local_chain()
    config = CollateralConfig(
        rate_per_gpu_day=TAO,
        min_deposit=TAO // 10,
        reclaim_delay_s=DEFAULT_RECLAIM_DELAY_S,
        proposal_ttl_s=DEFAULT_PROPOSAL_TTL_S,
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
    gas: dict[str, Any] = {"deploy": stack.gas}
    gas["deposit_first"] = client.deposit(10 * TAO).gas_used
    gas["deposit_topup"] = client.deposit(2 * TAO).gas_used
    proposal = SlashProposal(
        miner.ss58_address, KIND_FAILED_RENTAL, b"\x41" * 32, b"\x42" * 32, 8, renter.address.lower()
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
    gas["claim_bond"] = voters[0].claim().gas_used
    gas["reclaim_request"] = client.request_reclaim(miner.ss58_address, 2 * TAO).gas_used
    chain.advance(config.reclaim_delay_s + 1)
    gas["reclaim_finalize"] = client.finalize_reclaim(miner.ss58_address).gas_used
    lonely = SlashProposal(miner.ss58_address, KIND_CHEAT, b"\x43" * 32, b"\x44" * 32, 1)
    voters[0].attest(lonely)  # nobody follows it
    chain.advance(config.proposal_ttl_s + 1)
    gas["attest_reopens"] = voters[-1].attest(lonely).gas_used  # closes the expired opening, opens again
    chain.advance(config.proposal_ttl_s + 1)
    gas["expire"] = voters[0].expire(lonely).gas_used
    baseline = BASELINE_64 if validators == 64 else BASELINE if validators == 5 else {}
    now = {
        **{k: v for k, v in gas.items() if isinstance(v, int)},
        "deploy_Collateral": stack.gas["Collateral"],
    }
    ratio = {k: round(now[k] / v, 3) for k, v in baseline.items() if now.get(k)}
    return {
        "validators": validators,
        "gas": gas,
        "baseline": baseline,
        "ratio": ratio,
        "slashed_wei": 8 * TAO,
    }


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
    rows += [(f"deploy_{k}", v) for k, v in result["gas"]["deploy"].items()]
    sys.stdout.write(f"{'operation':<32} {'gas':>10} {'before':>10} {'ratio':>6}\n")
    for name, value in rows:
        before = result["baseline"].get(name)
        ratio = result["ratio"].get(name)
        sys.stdout.write(
            f"{name:<32} {value if value is not None else '-':>10} {before or '-':>10} "
            f"{f'{ratio:.2f}' if ratio else '-':>6}\n"
        )
    return 0
