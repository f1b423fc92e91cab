"""``register.py report|claim``: a renter made whole when a miner kills its lease inside the term.

- ``report LEASE --register.validators URL[,URL...]`` sends the rental as both sides signed it
  (kept at allocation with ``--register.renter_evm``; ``compute.operator.rentals``) to validators'
  evidence surfaces. Each checks both signatures and probes the endpoint the miner named; when
  validators holding half the stake saw it dead long enough inside its term, the miner's collateral
  is slashed and the slash is owed to the renter's EVM address.
- ``claim --collateral.rpc URL --collateral.address 0x...`` pays what the contract owes the renter's
  EVM key (``COLLATERAL_EVM_KEY`` or the keystore ``<wallet>/evmkeys/--collateral.evm_key``) to it.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import httpx
from rich.console import Console

from compute import safejson
from compute.collateral.errors import CollateralError, ContractReverted
from compute.collateral.hints import HINTS, WEI_PER_TAO, explain, tao
from compute.operator.commands import Result, resolve_lease_id
from compute.operator.errors import Refused, UsageError
from compute.operator.rentals import load_rental
from compute.operator.service import Operator
from compute.settings import SettingsError, common_from_args, environment


def add_collateral_commands(sub) -> None:  # noqa: ANN001 - the parser factory of compute.operator.cli
    report = sub("report", "tell validators your lease died inside its term (they probe it; you may be owed)")
    report.add_argument("lease", help="lease id (or a unique prefix of one in your book)")
    claim = sub("claim", "receive the compensation the collateral contract owes your EVM address")
    group = claim.add_argument_group("collateral")
    group.add_argument(
        "--collateral.evm_key",
        help="keystore name under <wallet>/evmkeys (COLLATERAL_EVM_KEY wins; default 'default')",
    )


async def _post(http: httpx.AsyncClient, url: str, body: bytes) -> dict[str, Any]:
    try:
        response = await http.post(f"{url.rstrip('/')}/collateral/report", content=body)
    except httpx.HTTPError as error:
        return {"url": url, "accepted": False, "detail": f"unreachable: {error}"}
    try:
        answer = safejson.loads(response.content)
    except ValueError:
        answer = {}
    if response.status_code == 202:
        return {"url": url, "accepted": True, "detail": f"watching until {answer.get('term_end', 0):.0f}"}
    return {"url": url, "accepted": False, "detail": str(answer.get("detail", response.text[:200]))}


async def cmd_report(op: Operator, args: argparse.Namespace) -> Result:
    lease = resolve_lease_id(op.book, op.hotkey, args.lease)
    rental = load_rental(op.rentals_dir, lease)
    urls = [u.strip() for u in (getattr(args, "register.validators", None) or "").split(",") if u.strip()]
    if not urls:
        raise UsageError("name the validators to report to: --register.validators URL[,URL...]")
    body = rental.model_dump_json().encode()
    async with httpx.AsyncClient(timeout=op.deadline_s, trust_env=False) as http:
        answers = await asyncio.gather(*(_post(http, url, body) for url in urls))
    if not any(a["accepted"] for a in answers):
        raise Refused(
            "no validator accepted the report: " + "; ".join(f"{a['url']}: {a['detail']}" for a in answers)
        )

    def render(console: Console) -> None:
        for a in answers:
            mark = "[green]accepted[/]" if a["accepted"] else "[red]refused[/]"
            console.print(f"{a['url']}: {mark} ({a['detail']})", highlight=False)

    return Result({"lease_id": lease, "reported_to": list(answers)}, render)


def _claim(args: argparse.Namespace) -> dict[str, Any]:
    try:
        from compute.collateral.chain import CollateralClient
        from compute.collateral.rpc import bounded_web3
    except ImportError as error:
        raise UsageError(
            f"claim needs the collateral extra: pip install -e '.[collateral]' ({error})"
        ) from None
    from compute.collateral.keys import load_account

    env = environment(args)
    rpc = getattr(args, "collateral.rpc", None) or env.get("COMPUTE_COLLATERAL_RPC")
    address = getattr(args, "collateral.address", None) or env.get("COMPUTE_COLLATERAL_ADDRESS")
    if not rpc or not address:
        raise UsageError("claim needs --collateral.rpc and --collateral.address")
    try:
        common = common_from_args(args, env)
    except SettingsError as error:
        raise UsageError(str(error)) from None
    key_name = getattr(args, "collateral.evm_key", None) or "default"
    try:
        account = load_account(env, common.wallet_name, common.wallet_path, key_name)
        client = CollateralClient(bounded_web3(rpc), address, account)
        owed = client.owed(account.address)
        if owed == 0:
            raise Refused(f"the contract owes nothing to {account.address}; hint: {HINTS['NothingOwed']}")
        tx = client.claim()
    except ContractReverted as error:
        what, hint = explain(error)
        raise Refused(f"{what}; hint: {hint}") from None
    except CollateralError as error:
        raise Refused(str(error)) from None
    return {
        "address": account.address.lower(),
        "claimed_wei": owed,
        "claimed_tao": owed / WEI_PER_TAO,
        "tx": tx.tx_hash,
    }


async def cmd_claim(op: Operator, args: argparse.Namespace) -> Result:
    payload = await asyncio.to_thread(_claim, args)

    def render(console: Console) -> None:
        console.print(
            f"claimed {tao(payload['claimed_wei'])} to {payload['address']} (tx {payload['tx']})",
            highlight=False,
        )

    return Result(payload, render)


COLLATERAL_HANDLERS = {"report": cmd_report, "claim": cmd_claim}

__all__ = ["COLLATERAL_HANDLERS", "add_collateral_commands"]
