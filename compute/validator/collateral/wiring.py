"""Build the validator's collateral parts from its settings (the entry point only calls this).

With ``--collateral.rpc`` unset it returns nothing and the validator has no collateral factor at
all. Otherwise it first reads the contract's proposal expiry and reclaim delay and refuses to run
(``CollateralError``) when they do not fit this validator's cheat window, dead run and longest
covered lease term (``compute.collateral.windows``): a cheat would outlive its proposal, or a miner
could reclaim before a failure is proposed. Then: a contract client (signing with the validator's
EVM key when it has one:
``COLLATERAL_EVM_KEY``, or the keystore unlocked by ``BT_WALLET_PASSWORD``; without one the
validator reads deposits and checks evidence but never attests), the credit factor for the
weights, the desk loop and, with ``--collateral.port``, the evidence surface in its own thread.
The parts need the ``collateral`` extra (web3); they are imported only when collateral is on, so a
validator installed without it runs as before.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compute.chain import Chain
from compute.collateral import ChainUnavailable, CollateralError, EvmKeyError, Windows
from compute.collateral.settings import CollateralSettings
from compute.transport import KeyWallet, MinerClient, RunningServer

if TYPE_CHECKING:  # the parts need the collateral extra (web3): imported only when collateral is on
    from compute.validator.collateral.credit import CollateralCredit
    from compute.validator.collateral.desk import CollateralDesk
    from compute.validator.collateral.reproduce import VerdictSource

log = logging.getLogger(__name__)


@dataclass
class CollateralParts:
    credit: CollateralCredit
    desk: CollateralDesk
    surface: RunningServer | None

    def close(self) -> None:
        self.desk.close()
        self.credit.close()
        if self.surface is not None:
            self.surface.stop()


def evm_account(settings: CollateralSettings, wallet_name: str, wallet_path: Path) -> Any | None:
    """The validator's EVM signing account, or None (read-only) with a warning saying why."""
    from compute.collateral.keys import account_from_hex, load_account

    try:
        if settings.evm_key_hex is not None:
            return account_from_hex(settings.evm_key_hex.get_secret_value())
        if settings.wallet_password is not None:
            env = {"BT_WALLET_PASSWORD": settings.wallet_password.get_secret_value()}
            return load_account(env, wallet_name, wallet_path, settings.evm_key)
    except EvmKeyError as error:
        log.warning("collateral: no usable EVM key (%s); reading deposits only, never attesting", error)
        return None
    log.warning(
        "collateral: no COLLATERAL_EVM_KEY (or BT_WALLET_PASSWORD for the keystore): reading deposits "
        "and checking evidence only, never attesting"
    )
    return None


def check_windows(client: Any, settings: CollateralSettings) -> None:
    """Refuse to run on a contract whose windows do not fit this validator's (CollateralError)."""
    try:
        config = client.config()
    except ChainUnavailable as error:
        raise CollateralError(f"cannot read the collateral contract's windows at start: {error}") from None
    windows = Windows(
        cheat_window_s=settings.cheat_window, dead_s=settings.dead_seconds, max_term_s=settings.max_term
    )
    problems = windows.problems(config.proposal_ttl_s, config.reclaim_delay_s)
    if problems:
        raise CollateralError(
            f"refusing to run on the collateral contract {settings.address}: " + "; ".join(problems)
        )


def build_collateral(
    settings: CollateralSettings,
    *,
    hotkey: Any,  # the validator's hotkey Keypair: signs probes and evidence
    wallet_name: str,
    wallet_path: Path,
    data_dir: Path,
    chain: Chain,
    store: VerdictSource,
) -> CollateralParts | None:
    if not settings.enabled:
        return None
    try:
        from compute.collateral.chain import CollateralClient
        from compute.collateral.rpc import RpcLimits, bounded_web3
    except ImportError as error:
        raise CollateralError(
            f"--collateral.rpc needs the collateral extra (pip install -e '.[collateral]'): {error}"
        ) from None
    from compute.collateral.standing import standing_path
    from compute.validator.collateral.book import CollateralBook, default_root
    from compute.validator.collateral.credit import CollateralCredit
    from compute.validator.collateral.desk import CollateralDesk
    from compute.validator.collateral.judging import Judge
    from compute.validator.collateral.peers import Peers
    from compute.validator.collateral.probing import Prober
    from compute.validator.collateral.reproduce import CheatJudge
    from compute.validator.collateral.surface import serve_surface

    w3 = bounded_web3(settings.rpc, RpcLimits(deadline_s=settings.rpc_timeout))
    account = evm_account(settings, wallet_name, wallet_path)
    client = CollateralClient(w3, settings.address, account)
    check_windows(client, settings)
    book = CollateralBook(default_root(data_dir))
    peers = Peers(settings.peers)
    prober = Prober(hotkey, book, settings.probe_seconds, settings.dead_seconds)
    miners = MinerClient(KeyWallet(hotkey), timeout=30.0)  # the desk's own: used on the desk's loop only
    judge = Judge(
        keypair=hotkey,
        book=book,
        peers=peers,
        miners=miners,
        client=client if account is not None else None,
        dead_s=settings.dead_seconds,
        leader_grace_s=3 * settings.sync_seconds,
        clock=time.time,
        cheats=CheatJudge(hotkey, book, store, settings.cheat_window, time.time),
        sync_s=settings.sync_seconds,
    )
    desk = CollateralDesk(chain, book, peers, prober, judge, settings.sync_seconds).start()
    desk.on_close = miners.aclose
    surface = serve_surface(book, settings.host, settings.port) if settings.port else None
    credit = CollateralCredit(
        client,
        store,
        settings.floor,
        timeout_s=settings.rpc_timeout + 5,  # a second net over the transport's own deadline
        budget_s=3 * settings.rpc_timeout,
        publish=standing_path(data_dir),
    )
    log.info(
        "collateral on: contract %s at %s, floor %.2f, attesting as %s, surface %s, %d peers",
        settings.address,
        settings.rpc,
        settings.floor,
        account.address if account is not None else "nobody",
        surface.url if surface else "off",
        len(settings.peers),
    )
    return CollateralParts(credit, desk, surface)


__all__ = ["CollateralParts", "build_collateral", "check_windows", "evm_account"]
