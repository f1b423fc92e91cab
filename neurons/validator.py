"""Compute subnet validator: settings -> wallet -> chain -> store -> client -> loops -> run.

Wiring only; see docs/validator.md. SIGTERM/SIGINT stop the loops and exit 0; all state is in the
store, so a restart (even after kill -9) resumes the open round without counting anything twice.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compute import VERSION_KEY, __version__  # noqa: E402
from compute.chain import ChainError, MetagraphSnapshot, connect  # noqa: E402
from compute.collateral import CollateralError  # noqa: E402
from compute.dashboard import DashboardOptions, start_dashboard  # noqa: E402
from compute.logs import configure_logging  # noqa: E402
from compute.scoring import ScoringConfig, load_gpu_table, load_holistic_config  # noqa: E402
from compute.settings import SettingsError  # noqa: E402
from compute.store import ValidatorStore  # noqa: E402
from compute.store.journal import LeaseJournal  # noqa: E402
from compute.transport import KeyWallet, WalletError, load_wallet  # noqa: E402
from compute.validator import (  # noqa: E402
    CanaryTiming,
    JournaledClient,
    LoopRunner,
    Oversight,
    PresenceLoop,
    ReleaseLoop,
    RoundLoop,
    RoundSchedule,
    ValidatorContext,
    ValidatorSettings,
    WandbLogger,
    WeightSetter,
    WeightsLoop,
    canary_identities,
    chain_block_seconds,
    chain_block_source,
    new_run_id,
    parse_validator,
    release_due,
    round_params,
    round_spread,
    round_step_timeout,
    split_budget,
    wandb_wanted,
)
from compute.validator.collateral.wiring import build_collateral  # noqa: E402

logger = logging.getLogger("neurons.validator")


def warn_without_permit(metagraph: MetagraphSnapshot, hotkey: str) -> bool:
    """Warn (and return False) when this hotkey has no validator permit: the chain refuses its weights."""
    own = metagraph.by_hotkey().get(hotkey)
    if own is None or own.validator_permit:
        return True
    logger.warning(
        "hotkey %s (uid %d, stake %.1f TAO) has NO validator permit on netuid %d: the chain will refuse "
        "the weights it sets until it earns one (more stake than the subnet's permit threshold, "
        "granted at an epoch). It still tests miners and keeps their scores.",
        hotkey,
        own.uid,
        own.stake,
        metagraph.netuid,
    )
    return False


async def run(s: ValidatorSettings) -> int:
    common = s.common
    wallet = load_wallet(common.wallet_name, common.wallet_hotkey, str(common.wallet_path))
    keypair = KeyWallet.from_wallet(wallet)
    chain = connect(common.chain_target, common.netuid)
    if not await asyncio.wait_for(asyncio.to_thread(chain.is_registered, keypair.ss58), 60):
        raise ChainError(f"hotkey {keypair.ss58} is not registered on netuid {common.netuid}")
    metagraph = await asyncio.wait_for(asyncio.to_thread(chain.metagraph), 60)
    warn_without_permit(metagraph, keypair.ss58)
    store = ValidatorStore(s.db_path)
    journal = LeaseJournal(s.db_path)  # every lease asked for, until the miner confirms its end
    client = JournaledClient(
        keypair, journal, new_run_id(), timeout=30.0, max_concurrency=max(64, s.concurrency * 4)
    )
    identities = canary_identities(
        s.canary_hotkeys, common.wallet_name, common.wallet_path, s.data_dir / "canary", s.canary_source
    )
    oversight = Oversight(
        canary_rate=s.canary_rate,
        trusted_renters=frozenset(s.trusted_renters),
        canary_renters=identities,
        canary_dir=s.data_dir / "canary",
        canary_timing=CanaryTiming.for_dwell(s.canary_dwell),
        offers=store.record_offer,  # the public feed's price and free-now (informational)
    )
    api_key = common.wandb_api_key.get_secret_value() if common.wandb_api_key else None
    wandb_on, why = wandb_wanted(s.wandb_off, s.wandb_on, api_key)
    logger.info("%s", why)
    wandb = WandbLogger(
        wandb_on,
        s.wandb_project,
        f"validator-{keypair.ss58[:8]}",
        s.data_dir / "wandb",
        api_key,
        {"version": __version__, "netuid": common.netuid},
    )
    scoring = ScoringConfig(rented_bonus=s.rented_bonus, ema_alpha=s.ema_alpha, missed_decay=s.missed_decay)
    setter = WeightSetter(chain, wallet, store, VERSION_KEY)
    collateral = build_collateral(
        s.collateral,
        hotkey=wallet.hotkey,
        wallet_name=common.wallet_name,
        wallet_path=common.wallet_path,
        data_dir=s.data_dir,
        chain=chain,
        store=store,
    )
    factors = collateral.credit if collateral is not None else None
    ctx = ValidatorContext(  # built once: every loop below shares these (and the timed lock)
        chain,
        store,
        client,
        keypair.ss58,
        round_params(s, load_holistic_config()),
        load_gpu_table(),
        scoring,
        oversight=oversight,
        allow_same_ip=s.allow_same_ip,
        credit_step=s.credit_step,
        credit_factors=factors,
        presence_window=s.presence_window,
    )
    weights_loop = WeightsLoop(ctx, setter, interval_blocks=s.weights_blocks)
    runner: LoopRunner | None = None

    async def on_limit() -> None:
        logger.info("%d rounds done: setting weights once more, then stopping", s.rounds)
        await weights_loop.run_step(await asyncio.to_thread(chain.block))
        try:  # give back what is still owed (the next start of this validator tries again)
            await asyncio.wait_for(release_due(client), 30)
        except asyncio.TimeoutError:
            logger.warning("leases still owed at stop: released at the next start")
        assert runner is not None  # on_limit is called only from inside runner.run()
        runner.stop.set()

    block_seconds = await chain_block_seconds(chain)
    step_timeout = round_step_timeout(s.miner_timeout, s.round_blocks, block_seconds)
    interval_s = s.round_blocks * block_seconds
    throughput_budget, presence_budget = split_budget(s.load_budget, s.presence_share)
    round_loop = RoundLoop(
        ctx,
        interval_blocks=s.round_blocks,
        concurrency=s.concurrency,
        step_timeout=step_timeout,
        schedule=RoundSchedule(
            spread_s=round_spread(s.spread_seconds, interval_s, step_timeout, s.miner_timeout),
            load_budget=throughput_budget,
            check_seconds=s.check_seconds,
            interval_s=interval_s,
        ),
        wandb=wandb,
        rounds_limit=s.rounds,
        on_limit=on_limit,
    )
    presence_loop = PresenceLoop(
        ctx,
        presence_s=s.presence_seconds,
        presence_budget=presence_budget,
        interval_s=s.presence_interval,
        step_timeout=max(600.0, 2 * s.miner_timeout),
        first_within_s=interval_s,
    )
    release_loop = ReleaseLoop(client, block_seconds)
    loops = [release_loop, round_loop, weights_loop, presence_loop]
    loops += [collateral.desk] if collateral is not None else []
    runner = LoopRunner(chain_block_source(chain), loops)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, runner.stop.set)
    logger.info(
        "validator hotkey=%s netuid=%d network=%s store=%s block_time=%.2fs round_timeout=%.0fs",
        keypair.ss58,
        common.netuid,
        common.chain_target,
        s.db_path,
        block_seconds,
        round_loop.step_timeout,
    )
    dashboard = start_dashboard(  # its own process: a page flood never moves this process's clock
        DashboardOptions(
            s.db_path,
            s.dashboard_host,
            s.dashboard_port,
            s.dashboard_full,
            (common.wallet_name, common.wallet_hotkey, str(common.wallet_path)),
            debug=common.debug,
        )
    )
    announce = asyncio.create_task(dashboard.ready())
    try:
        await runner.run()
    finally:
        announce.cancel()
        await dashboard.close()
        if collateral is not None:
            collateral.close()
        wandb.close()
        await client.aclose()
        for identity in identities:
            await identity.aclose()
        store.close()
        journal.close()
        await asyncio.to_thread(chain.close)
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        settings = parse_validator(argv)
    except SettingsError as exc:
        print(f"validator: {exc}", file=sys.stderr)
        return 2
    common = settings.common
    configure_logging(common.debug, common.trace, common.logging_dir, "validator", info_to_stdout=True)
    try:
        return asyncio.run(run(settings))
    except (WalletError, ChainError, CollateralError) as exc:
        logger.error("validator cannot start: %s", exc)
        return 1


if __name__ == "__main__":
    sys.exit(main())
