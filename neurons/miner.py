"""Compute subnet miner: settings -> wallet -> chain -> backend -> reconcile -> serve -> loops.

Wiring only; see docs/miner.md. SIGTERM/SIGINT stop the API and exit 0, leaving leases
running: on the next start ``reconcile`` adopts them (or brings their SSH back).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compute.allocation import (  # noqa: E402
    AllocationManager,
    Backend,
    HealthMonitor,
    IdleWatch,
    LeaseStore,
    ManagerLimits,
)
from compute.allocation.hosts.backend import MultiHostBackend  # noqa: E402
from compute.allocation.lifecycle.diskwatch import DiskWatch  # noqa: E402
from compute.allocation.lifecycle.hostwatch import check_and_recover  # noqa: E402
from compute.allocation.lifecycle.idle import IDLE_INTERVAL_S  # noqa: E402
from compute.chain import ChainError, connect  # noqa: E402
from compute.collateral import CollateralError  # noqa: E402
from compute.logs import configure_logging  # noqa: E402
from compute.miner import build_miner_app, gpu_specs, specs_provider  # noqa: E402
from compute.miner.cover import build_guard  # noqa: E402
from compute.miner.price import PriceError, parse_price, price_for  # noqa: E402
from compute.miner.service import (  # noqa: E402
    PeriodicLoop,
    StartupError,
    build_backend,
    build_catalog,
    build_multihost,
    build_volumes,
    check_port_free,
    check_registered,
)
from compute.miner.specs import multihost_specs  # noqa: E402
from compute.miner.verdicts import FILE_NAME as VERDICTS_FILE  # noqa: E402
from compute.miner.verdicts import VerdictLog  # noqa: E402
from compute.settings import MinerSettings, SettingsError, parse_miner  # noqa: E402
from compute.specs import SpecsCache  # noqa: E402
from compute.transport import (  # noqa: E402
    AccessPolicy,
    KeyWallet,
    WalletError,
    load_wallet,
    raise_nofile_limit,
    serve,
)

logger = logging.getLogger("neurons.miner")
EXPIRY_INTERVAL_S = 5.0
REPUBLISH_INTERVAL_S = 600.0
METAGRAPH_REFRESH_S = 120.0


async def run(settings: MinerSettings) -> int:
    common = settings.common
    wallet = load_wallet(common.wallet_name, common.wallet_hotkey, str(common.wallet_path))
    keypair = KeyWallet.from_wallet(wallet)
    soft, hard = raise_nofile_limit()
    logger.info("open-file limit %d (hard %d); see docs/miner.md for pm2", soft, hard)
    check_port_free(settings.axon_ip, settings.axon_port)
    try:
        chain = connect(common.chain_target, common.netuid)
    except ChainError as exc:
        raise StartupError(f"bad chain settings: {exc}") from None
    await asyncio.to_thread(check_registered, chain, keypair.ss58, settings)
    public_ip = settings.public_ip

    specs_cache = SpecsCache(ttl_s=300.0)
    host = await asyncio.to_thread(specs_cache.get)
    catalog = build_catalog(settings)
    store = LeaseStore(settings.data_dir / "leases.db")
    multi: MultiHostBackend | None = None
    if settings.hosts_file is not None:  # several Docker hosts (docs/architecture.md)
        multi = build_multihost(settings, keypair.ss58, store, catalog)
        up = await multi.check_hosts()
        logger.info("hosts up=%s down=%s", [n for n, ok in up.items() if ok], multi.down_report())
        backend: Backend = multi
        gpus = multi.gpu_specs()
    else:
        gpus = gpu_specs(host, settings.gpus)
        known = [g.uuid for g in gpus if g.uuid]
        uuids = known if len(known) == len(gpus) else None  # all or none
        backend = build_backend(
            settings, uuids, settings.ssh_host or public_ip, miner_id=keypair.ss58, catalog=catalog
        )
    limits = ManagerLimits(
        max_cpu=settings.max_cpu,
        max_memory_gb=settings.max_memory_gb,
        max_disk_gb=settings.max_disk_gb,
        max_lease_s=settings.max_lease_s,
    )
    manager = AllocationManager(
        store, backend, gpus, limits, volumes=build_volumes(settings, backend), placement=multi
    )
    report = await manager.reconcile()
    monitor = HealthMonitor(
        manager,
        settings.axon_ip,
        settings.lease_lost_after,
        host_addresses=multi.probe_addresses() if multi is not None else None,
    )
    logger.info(
        "miner hotkey=%s backend=%s gpus=%d leases=%s",
        keypair.ss58,
        backend.name,
        len(gpus),
        {k: len(v) for k, v in report.items()},
    )

    policy = AccessPolicy(
        chain.metagraph,
        min_stake=settings.min_stake,
        require_permit=not settings.allow_non_validators,
        allow_hotkeys=settings.whitelist_hotkeys,
        deny_hotkeys=settings.blacklist_hotkeys,
        allow_coldkeys=settings.whitelist_coldkeys,
        deny_coldkeys=settings.blacklist_coldkeys,
        refresh_s=METAGRAPH_REFRESH_S,
    )
    app = build_miner_app(
        keypair,
        policy,
        manager,
        specs_provider(specs_cache.get, backend.name, gpus)
        if multi is None
        else multihost_specs(specs_cache.get, multi, manager),
        templates=catalog,
        monitor=monitor,
        verdicts=VerdictLog(settings.data_dir / VERDICTS_FILE),
        guard=build_guard(settings.collateral_rpc, settings.collateral_address, wallet.hotkey.ss58_address),
        price=price_for(parse_price(settings.price), gpus) if settings.price.strip() else None,
    )

    async def publish() -> None:
        await asyncio.to_thread(chain.serve, wallet, public_ip, settings.public_port)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loops = [
        PeriodicLoop("expiry", EXPIRY_INTERVAL_S, manager.sweep),
        PeriodicLoop("republish", REPUBLISH_INTERVAL_S, publish),
        PeriodicLoop("idle", IDLE_INTERVAL_S, IdleWatch(manager).check_once, timeout_s=600.0),
    ]
    if multi is not None:
        hosts_backend = multi
        loops.append(
            PeriodicLoop(
                "hosts", settings.host_check_interval, lambda: check_and_recover(hosts_backend, manager)
            )
        )
    if settings.backend == "docker" and settings.disk_check_interval > 0:  # where disk_gb is advisory
        loops.append(
            PeriodicLoop("disk", settings.disk_check_interval, DiskWatch(manager).check_once, timeout_s=600.0)
        )
    if settings.health_interval > 0:
        loops.append(
            PeriodicLoop("lease-health", settings.health_interval, monitor.check_once, timeout_s=600.0)
        )
    tasks = [asyncio.create_task(item.run(stop), name=item.name) for item in loops]
    logger.info(
        "serving on %s:%d (published as %s:%d)",
        settings.axon_ip,
        settings.axon_port,
        public_ip,
        settings.public_port,
    )
    try:
        await serve(app, settings.axon_ip, settings.axon_port, stop)
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        if hasattr(backend, "close"):
            await backend.close()  # stop listening; leases stay in the store and are adopted on restart
        manager.store.close()
        if manager.volumes is not None:
            manager.volumes.store.close()
        chain.close()
    logger.info("miner stopped; leases left running")
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        settings = parse_miner(argv)
        parse_price(settings.price)  # a bad price is a bad setting, before anything starts
    except PriceError as exc:
        print(f"miner: bad settings: --miner.price: {exc}", file=sys.stderr)
        return 2
    except SettingsError as exc:
        print(f"miner: bad settings: {exc}", file=sys.stderr)
        return 2
    common = settings.common
    configure_logging(common.debug, common.trace, common.logging_dir, name="miner", info_to_stdout=True)
    try:
        return asyncio.run(run(settings))
    except (StartupError, WalletError, SettingsError, CollateralError) as exc:
        logger.error("%s", exc)
        return 1


if __name__ == "__main__":
    sys.exit(main())
