"""``python -m compute collateral ...``: the miner's deposit, top-up, reclaim and status; a renter's
claim; the contract build and a local dev chain (the gas benchmark: ``python -m compute bench collateral-gas``).

    deposit  --collateral.amount TAO   (the wallet hotkey's deposit: one per hotkey)
    topup    (the same; refuses when there is no deposit yet)
    reclaim  --collateral.amount TAO   (ask)  |  --collateral.finalize  |  --collateral.cancel
    status   [--collateral.gpus N]     (deposit, required amount, next slash, open proposals)
    claim    (a renter: pay what the contract owes the key's address to it)
    associate (link the EVM key to the wallet's hotkey on the subnet: associate_evm_key)
    build    [--check]  (compile contracts/ with solcjs into the committed artifact, or compare)
    devchain [--devchain.port P]  (a local EVM with the contracts deployed, served on 127.0.0.1)

The hotkey whose deposit is meant is the wallet's (``--wallet.name/--wallet.hotkey/--wallet.path``,
only its public part is read); the EVM key signs (``compute.collateral.keys``).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from compute.collateral.errors import CollateralError, ContractReverted
from compute.collateral.hints import WEI_PER_TAO, explain, tao, utc
from compute.settings import SettingsError, add_common_args, common_from_args, environment

logger = logging.getLogger(__name__)
WEI_PER_RAO = 10**9
RPC_TIMEOUT_S = 10.0  # compute.collateral.rpc.DEADLINE_S (not imported here: web3 is the extra's)


def tao_to_wei(text: str) -> int:
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise SettingsError(f"--collateral.amount: not a number: {text!r}") from None
    wei = value * WEI_PER_TAO
    if value <= 0 or wei != wei.to_integral_value() or int(wei) % WEI_PER_RAO:
        raise SettingsError(f"--collateral.amount: {text} TAO is not a positive whole number of rao")
    return int(wei)


def _chain_args(parser: argparse.ArgumentParser) -> None:
    add_common_args(parser)
    group = parser.add_argument_group("collateral")
    group.add_argument("--collateral.rpc", dest="rpc", help="EVM JSON-RPC URL (env COMPUTE_COLLATERAL_RPC)")
    group.add_argument(
        "--collateral.address",
        dest="address",
        help="Collateral contract address (env COMPUTE_COLLATERAL_ADDRESS)",
    )
    group.add_argument(
        "--collateral.evm_key",
        dest="evm_key",
        default=None,
        help="keystore name under <wallet>/evmkeys (default 'default'); COLLATERAL_EVM_KEY wins",
    )
    group.add_argument(
        "--collateral.rpc_timeout",
        dest="rpc_timeout",
        type=float,
        default=RPC_TIMEOUT_S,
        help=f"seconds one JSON-RPC call may take in all, retries included (default {RPC_TIMEOUT_S:g})",
    )
    group.add_argument("--json", action="store_true", help="print one JSON object")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m compute collateral",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (
        ("deposit", "deposit collateral for the wallet's hotkey"),
        ("topup", "add to an existing deposit"),
    ):
        p = sub.add_parser(name, help=text)
        _chain_args(p)
        p.add_argument("--collateral.amount", dest="amount", required=True, help="TAO to deposit")
    p = sub.add_parser("reclaim", help="ask a reclaim, finalize it after the delay, or cancel it")
    _chain_args(p)
    p.add_argument(
        "--collateral.amount", dest="amount", help="TAO to ask back (with no --collateral.finalize/cancel)"
    )
    p.add_argument(
        "--collateral.finalize", dest="finalize", action="store_true", help="receive the pending reclaim"
    )
    p.add_argument(
        "--collateral.cancel", dest="cancel", action="store_true", help="cancel the pending reclaim"
    )
    p = sub.add_parser("status", help="the hotkey's deposit, the required amount and the next slash")
    _chain_args(p)
    p.add_argument(
        "--collateral.gpus", dest="gpus", type=int, default=1, help="proven GPUs (sizes required/next slash)"
    )
    p = sub.add_parser("claim", help="a renter: receive the compensation owed to the EVM key's address")
    _chain_args(p)
    p = sub.add_parser("associate", help="link the EVM key to the wallet's hotkey (associate_evm_key)")
    add_common_args(p)
    p.add_argument(
        "--collateral.evm_key",
        dest="evm_key",
        help="keystore name under <wallet>/evmkeys (COLLATERAL_EVM_KEY wins)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p = sub.add_parser("devchain", help="serve a local EVM with the contracts deployed (Ctrl-C stops it)")
    p.add_argument(
        "--devchain.port", dest="port", type=int, default=0, help="port on 127.0.0.1 (default: free)"
    )
    p.add_argument(
        "--devchain.netuid", dest="netuid", type=int, default=27, help="subnet the stake source reads"
    )
    p.add_argument(
        "--devchain.rate", dest="rate", type=float, default=1.0, help="TAO per GPU-day (default 1)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p = sub.add_parser("build", help="compile contracts/ into the committed artifact (solcjs)")
    p.add_argument("--check", action="store_true", help="only compare the artifact with a fresh compile")
    p.add_argument(
        "--solc.dir", dest="solc_dir", help="folder holding node_modules/solc (env COMPUTE_SOLC_DIR)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        if args.command == "build":
            return _build(args)
        if args.command == "associate":
            return _associate(args)
        if args.command == "devchain":
            return _devchain(args)
        return _chain_command(args)
    except ContractReverted as error:
        what, hint = explain(error)
        sys.stderr.write(f"error: {what}\nhint: {hint}\n")
        return 1
    except (CollateralError, SettingsError) as error:
        sys.stderr.write(f"error: {error}\n")
        return 1


def _build(args: argparse.Namespace) -> int:
    from compute.collateral import build

    compiler = build.find_compiler(args.solc_dir)
    if compiler is None:
        sys.stderr.write(
            f"error: node and solc {build.SOLC_VERSION} not found: "
            f"npm install --prefix ~/.cache/compute-solc solc@{build.SOLC_VERSION}\n"
        )
        return 1
    if args.check:
        diffs = build.differences(compiler)
        for line in diffs:
            sys.stderr.write(f"artifact: {line}\n")
        return 1 if diffs else 0
    sys.stdout.write(f"wrote {build.build(compiler)}\n")
    return 0


def _chain_command(args: argparse.Namespace) -> int:
    from compute.collateral.chain import CollateralClient
    from compute.collateral.keys import load_account
    from compute.collateral.rpc import RpcLimits, bounded_web3

    env = environment(args)
    common = common_from_args(args, env)
    rpc = args.rpc or env.get("COMPUTE_COLLATERAL_RPC")
    address = args.address or env.get("COMPUTE_COLLATERAL_ADDRESS")
    if not rpc or not address:
        raise SettingsError("--collateral.rpc and --collateral.address are required")
    if not 0 < args.rpc_timeout <= 600:
        raise SettingsError(f"--collateral.rpc_timeout: {args.rpc_timeout:g} s is not in (0, 600]")
    w3 = bounded_web3(rpc, RpcLimits(deadline_s=args.rpc_timeout))
    hotkey = _hotkey_ss58(common.wallet_name, common.wallet_hotkey, common.wallet_path)
    needs_key = args.command != "status"
    account = (
        load_account(env, common.wallet_name, common.wallet_path, args.evm_key or "default")
        if needs_key
        else None
    )
    client = CollateralClient(w3, address, account)
    out: dict[str, Any] = {"command": args.command, "hotkey": hotkey}
    if args.command == "claim":
        assert account is not None
        owed = client.owed(account.address)
        result = client.claim()
        out |= {"address": account.address.lower(), "claimed_wei": owed, "claimed_tao": _tao_text(owed)}
        out["tx"], out["gas"] = result.tx_hash, result.gas_used
        return _print(out, args.json)
    if args.command in ("deposit", "topup"):
        if args.command == "topup" and not client.deposit_of(hotkey).exists:
            raise SettingsError("no deposit for this hotkey yet: use deposit")
        result = client.deposit(tao_to_wei(args.amount))
        out["tx"], out["gas"] = result.tx_hash, result.gas_used
    elif args.command == "reclaim":
        if args.finalize + args.cancel + bool(args.amount) != 1:
            raise SettingsError(
                "reclaim takes one of --collateral.amount, --collateral.finalize, --collateral.cancel"
            )
        if args.finalize:
            result = client.finalize_reclaim(hotkey)
        elif args.cancel:
            result = client.cancel_reclaim(hotkey)
        else:
            result = client.request_reclaim(hotkey, tao_to_wei(args.amount))
        out["tx"], out["gas"] = result.tx_hash, result.gas_used
    state = client.deposit_of(hotkey)
    out["deposit"] = state.__dict__ | {
        "amount_tao": _tao_text(state.amount),
        "pending_reclaim_tao": _tao_text(state.pending_reclaim),
    }
    if args.command == "status":
        out["gpus"] = args.gpus
        out["required_wei"] = client.required(args.gpus)
        out["next_slash_wei"] = client.next_slash_amount(hotkey, args.gpus)
        out["required_tao"] = _tao_text(out["required_wei"])
        out["next_slash_tao"] = _tao_text(out["next_slash_wei"])
    return _print(out, args.json)


def _associate(args: argparse.Namespace) -> int:
    """``associate_evm_key`` through the SDK's intent: the hotkey signs, the EVM key proves itself."""
    from compute.chain import ChainError, connect
    from compute.collateral.keys import load_account
    from compute.transport import WalletError, load_wallet

    env = environment(args)
    common = common_from_args(args, env)
    account = load_account(env, common.wallet_name, common.wallet_path, args.evm_key or "default")
    try:
        wallet = load_wallet(common.wallet_name, common.wallet_hotkey, str(common.wallet_path))
        chain = connect(common.chain_target, common.netuid)
    except (WalletError, ChainError) as error:
        raise SettingsError(str(error)) from None
    try:
        block = chain.associate_evm_key(wallet, account)
    except ChainError as error:
        raise CollateralError(f"associate_evm_key refused: {error}") from None
    finally:
        chain.close()
    out = {"command": "associate", "hotkey": wallet.hotkey.ss58_address, "evm": account.address.lower()}
    return _print(out | {"netuid": common.netuid, "block": block}, args.json)


def _devchain(args: argparse.Namespace) -> int:
    """Serve a local EVM with the contracts until interrupted; print where (and a funded test key)."""
    import time

    from compute.collateral.devchain import serve_local

    local = serve_local(args.netuid, rate_tao=args.rate, port=args.port)
    faucet = local.chain.accounts[-1]
    out = {
        "rpc": local.url,
        "collateral": local.address,
        "stake_source": str(local.stack.stake_source).lower(),
        "metagraph_double": str(local.stack.mirror.metagraph).lower(),
        "uid_lookup_double": str(local.stack.mirror.uid_lookup).lower(),
        "keeper_key": "0x" + bytes(local.chain.accounts[0].key).hex(),
        "faucet_key": "0x" + bytes(faucet.key).hex(),
        "note": "eth-tester's public test keys: never use them anywhere else",
    }
    _print(out, args.json)
    sys.stdout.flush()
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        local.stop()
    return 0


def _hotkey_ss58(wallet_name: str, hotkey: str, path: Path) -> str:
    from compute.transport import WalletError, load_wallet

    try:
        return load_wallet(wallet_name, hotkey, str(path)).hotkey.ss58_address
    except WalletError as error:
        raise SettingsError(str(error)) from None


def _tao_text(wei: int) -> str:
    """An amount for ``--json``: TAO as an exact decimal string (the ``*_wei`` integer beside it)."""
    return tao(wei).removesuffix(" TAO")


def _print(out: dict[str, Any], as_json: bool) -> int:
    if as_json:
        sys.stdout.write(json.dumps(out, default=str) + "\n")
    else:
        sys.stdout.writelines(f"{line}\n" for line in human_lines(out))
    return 0


def human_lines(out: dict[str, Any]) -> list[str]:
    """A command's answer for people: amounts in TAO, times in UTC, one fact a line."""
    rows: list[tuple[str, str]] = []
    for key in ("hotkey", "evm", "address", "netuid", "block", "rpc", "collateral"):
        if key in out:
            rows.append((key, str(out[key])))
    if "claimed_wei" in out:
        rows.append(("claimed", tao(out["claimed_wei"])))
    if "tx" in out:
        rows.append(("tx", f"{out['tx']} (gas {out['gas']:,})"))
    deposit = out.get("deposit")
    if deposit is not None:
        if deposit["owner"] == "0x" + "00" * 20:
            rows.append(("deposit", "none"))
        else:
            rows.append(("deposit", f"{tao(deposit['amount'])} (owner {deposit['owner']})"))
        if deposit["pending_reclaim"]:
            when = utc(deposit["reclaim_at"])
            rows.append(("pending reclaim", f"{tao(deposit['pending_reclaim'])}, payable from {when}"))
        if deposit["open_proposals"]:
            until = utc(deposit["blocked_until"])
            rows.append(("open slash proposals", f"{deposit['open_proposals']} (until {until})"))
        rows.append(("slashes so far", str(deposit["slashes"])))
    if "required_wei" in out:
        gpus = out.get("gpus", 1)
        rows.append(("required", f"{tao(out['required_wei'])} for {gpus} GPU{'s' if gpus != 1 else ''}"))
        rows.append(("next slash", tao(out["next_slash_wei"])))
    shown = {"command", "hotkey", "evm", "address", "netuid", "block", "rpc", "collateral", "tx", "gas"}
    shown |= {"deposit", "gpus", "required_wei", "next_slash_wei", "required_tao", "next_slash_tao"}
    shown |= {"claimed_wei", "claimed_tao"}
    rows += [(key.replace("_", " "), str(value)) for key, value in out.items() if key not in shown]
    width = max([20, *(len(key) for key, _ in rows)])  # 20: "open slash proposals"
    return [f"{key:<{width}}  {value}" for key, value in rows]
