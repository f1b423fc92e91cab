"""``python -m compute localnet --cluster``: a proven link, a rented 2-node cluster, one training step.

Two hosts, each a network namespace (``netns.Hosts``: root only) joined to the other by its own
virtual link and to the root namespace by another. On a simulated chain:

1. **The link proven.** The validator (this process, root namespace) starts one interconnect
   participant inside each namespace and runs the proof of docs/cluster.md over them: the shards
   are all-reduced over the hosts' link (gloo, ``GLOO_SOCKET_IFNAME=peer``), the commitments and
   openings come back on the validator's own pipes and clock. Then a plain all-reduce of the same
   size, for comparison.
2. **The cluster rented.** A miner (``neurons.miner``, embedded SSH backend) runs in each
   namespace, its API and its leases' SSH bound to its namespace's address. The renter (the
   validator's wallet, as the plain demo's renters) runs the real CLI:
   ``register.py allocate --nodes 2 --min-link-gbps X``: the renter proves the link itself across
   its two leases (participants over its SSH sessions, its key, its clock) and keeps the cluster
   only on a passing proof at X or more; then ``cluster run`` (SSH from the root namespace into each
   lease over its host's link).
3. **One training step.** ``cluster run`` starts a tiny model's forward/backward on each node and
   all-reduces its gradients with gloo over the hosts' link; rank 0 checks the reduced gradient
   against every rank's own (each recomputed from the shared seeds) and times the all-reduce.
   Then ``deallocate --cluster``.

Not proven here: the miners' compute figures. ``allocate --nodes`` picks machines by proven fp16
TFLOPS; this mode records one figure per miner in a store of its own (the plain ``localnet``
proves them with Proof-of-GPU rounds, which would triple this demo's time) and says so.
"""

from __future__ import annotations

import json
import logging
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compute.interconnect import InterconnectSession, local_participants, new_challenge
from compute.store import PogResult, ValidatorStore

from .netns import EXEC_IN, LINK_IFNAME, Host, Hosts, NetnsError
from .network import NETUID, LocalNet, LocalnetError, Options

log = logging.getLogger(__name__)

PROOF_BYTES = 8 << 20  # the proof's vector: 8 MiB of int32
RENDEZVOUS_PORT = 29500  # the proof's process group, on rank 0's end of the hosts' link
DEMO_TFLOPS = (1.0, 0.95)  # the figures recorded for the two miners (not proven in this mode)
RENTER_MIN_LINK_GBPS = 0.05  # the renter keeps the cluster only if its own proof shows this (Gbit/s)
SSH_PORTS = "42000-42049"  # each namespace has its own ports: the same range on both hosts

TRAIN_STEP = """
import json, os, time, torch, torch.distributed as dist
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group("gloo", init_method=f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}",
                        rank=rank, world_size=world)
def grads(r):
    torch.manual_seed(0)  # every rank: the same model
    model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.Tanh(), torch.nn.Linear(1024, 1024))
    g = torch.Generator().manual_seed(100 + r)  # each rank: its own batch
    x, y = torch.randn(64, 1024, generator=g), torch.randn(64, 1024, generator=g)
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    return loss.item(), torch.cat([p.grad.flatten() for p in model.parameters()])
loss, flat = grads(rank)
dist.barrier()
started = time.perf_counter()
dist.all_reduce(flat)
seconds = time.perf_counter() - started
losses = [torch.zeros(1) for _ in range(world)]
dist.all_gather(losses, torch.tensor([loss]))
if rank == 0:
    expected = sum(grads(r)[1] for r in range(world))
    size = flat.numel() * 4
    print("TRAIN " + json.dumps({
        "world": world, "params": flat.numel(), "loss_mean": sum(t.item() for t in losses) / world,
        "grad_sum_norm": flat.norm().item(), "matches_every_rank": bool(torch.allclose(flat, expected, atol=1e-5)),
        "allreduce_bytes": size, "allreduce_s": seconds,
        "allreduce_gbs": 2 * (world - 1) / world * size / seconds / 1e9,
    }), flush=True)
dist.destroy_process_group()
"""


@dataclass(frozen=True)
class ClusterOptions:
    workdir: Path = Path(".localnet")
    timeout_s: float = 240.0
    debug: bool = False


class ClusterDemo:
    """The demo's steps; ``run`` returns its summary, ``stop`` undoes everything (idempotent)."""

    def __init__(
        self, options: ClusterOptions, repo_root: Path, on_line: Callable[[str, str], None] | None
    ) -> None:
        self.options, self.repo_root = options, repo_root
        net_options = Options(miners=2, validators=1, workdir=options.workdir, debug=options.debug)
        self.net = LocalNet(net_options, repo_root, on_line=on_line)
        self.hosts = Hosts()
        self.deadline = time.monotonic() + options.timeout_s

    def run(self) -> dict[str, Any]:
        try:
            hosts = self.hosts.up()
        except NetnsError as exc:
            raise LocalnetError(f"--cluster: {exc}") from None
        self.net.create()
        shutil.rmtree(self.net.workdir / "cluster", ignore_errors=True)  # an earlier run's book and figures
        store = self.record_figures()
        miners = self.start_miners(hosts)
        link = self.prove_link(hosts)
        self.net.wait_for_miners(miners, timeout_s=self.left())
        rental = self.rent_and_train(hosts, store)
        return {"mode": "cluster", "link": link, **rental}

    def stop(self) -> None:
        self.net.stop()
        self.hosts.down()

    def left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise LocalnetError(f"--cluster: not done within {self.options.timeout_s:.0f}s")
        return left

    # ------------------------------------------------------------------ steps
    def record_figures(self) -> Path:
        """A store of the miners' fp16 TFLOPS per GPU, for ``allocate --nodes`` (recorded, not proven)."""
        store = ValidatorStore(self.net.workdir / "cluster" / f"validator-{NETUID}.db")
        try:
            round_id = store.begin_round(1).round_id
            for miner, figure in zip(self.net.miners, DEMO_TFLOPS, strict=True):
                store.record_result(
                    PogResult(round_id, miner.uid, miner.wallet.hotkey.ss58_address, ok=True, sample=1.0,
                              models=("cpu",), gpu_count=1, tflops_fp16=figure, tflops_fp32=figure / 2,
                              created=time.time())
                )  # fmt: skip
            store.finish_round(round_id, [])
        finally:
            store.close()
        return store.path

    def start_miners(self, hosts: list[Host]) -> list:
        children = []
        for miner, host in zip(self.net.miners, hosts, strict=True):
            args = ["-c", EXEC_IN, host.netns, "-m", "neurons.miner", *self.net._common_args(miner)]
            args += [
                "--axon.ip", host.address, "--axon.port", "8091", "--axon.external_ip", host.address,
                "--miner.backend", "embedded", "--miner.ssh_host", host.address,
                "--miner.ssh_port_range", SSH_PORTS, "--miner.data_dir", str(self.net.workdir / miner.name),
            ]  # fmt: skip
            children.append(self.net.processes.start(miner.name, args))
            log.info("%s uid=%d starting in %s at %s", miner.name, miner.uid, host.netns, host.address)
        return children

    def prove_link(self, hosts: list[Host]) -> dict[str, Any]:
        """The interconnect proof and a plain all-reduce, participants in the namespaces."""
        counted = self.hosts.link_bytes()
        participants = local_participants(
            len(hosts),
            wrappers=[["ip", "netns", "exec", h.netns] for h in hosts],
            rendezvous=hosts[0].link_address,
            env={"GLOO_SOCKET_IFNAME": LINK_IFNAME},
            names=[f"netns:{h.netns}" for h in hosts],
            port=RENDEZVOUS_PORT,
            cwd=str(self.repo_root),
        )
        try:
            with participants as (channels, init):
                session = InterconnectSession(channels)  # type: ignore[arg-type]
                session.setup(init, device="cpu", timeout_s=min(90.0, self.left()))
                challenge = new_challenge(
                    [c.endpoint for c in channels], vector_bytes=PROOF_BYTES, deadline_s=30.0
                )
                verdict = session.prove(challenge)
                plain = session.plain(challenge.chunks * challenge.chunk_len)
        except TimeoutError as exc:
            raise LocalnetError(f"--cluster: the link proof: {exc}") from None
        return {
            "hosts": [h.netns for h in hosts],
            "addresses": [h.link_address for h in hosts],
            "passed": verdict.passed,
            "failures": list(verdict.failures),
            "vector_bytes": challenge.vector_bytes,
            "interval_s": round(verdict.interval_s or 0.0, 4),
            "bandwidth_gbs": round(verdict.bandwidth_gbs, 4),
            "plain_gbs": round(challenge.link_bytes / plain.interval_s / 1e9, 4),
            "link_counted_bytes": self.hosts.link_bytes() - counted,  # proof + plain, both ways
        }

    def register(self, store: Path, *args: str, timeout_s: float = 120.0) -> subprocess.CompletedProcess[str]:
        validator = self.net.validator
        assert validator is not None
        argv = [
            sys.executable, str(self.repo_root / "neurons" / "register.py"),
            "--subtensor.network", f"sim:{self.net.chain_path}", "--netuid", str(NETUID),
            "--wallet.name", validator.name, "--wallet.path", str(self.net.wallet_root),
            "--register.data_dir", str(self.net.workdir / "cluster" / "register"),
            "--register.pog_db", str(store), *args,
        ]  # fmt: skip
        log.info("renter: register.py %s", " ".join(args[:4]))
        try:
            return subprocess.run(
                argv, capture_output=True, text=True, timeout=min(timeout_s, self.left()), cwd=self.repo_root
            )
        except subprocess.TimeoutExpired:
            raise LocalnetError(f"--cluster: register.py {args[0]} did not finish in time") from None

    def rent_and_train(self, hosts: list[Host], store: Path) -> dict[str, Any]:
        before_check = self.hosts.link_bytes()
        done = self.register(
            store, "allocate", "--nodes", "2", "--ttl", "30m", "--ram-gb", "2", "--json",
            "--min-link-gbps", str(RENTER_MIN_LINK_GBPS), "--link-mib", str(PROOF_BYTES >> 20),
            "--link-python", sys.executable, "--link-ifname", LINK_IFNAME,
        )  # fmt: skip
        if done.returncode != 0:
            raise LocalnetError(
                f"--cluster: allocate --nodes 2 failed ({done.returncode}): {done.stderr.strip()} "
                f"{done.stdout.strip()[-1000:]}"
            )
        answer = json.loads(done.stdout)
        cluster = answer["cluster"]
        renter_link = {
            **{k: answer["link"][k] for k in ("passed", "failures", "vector_bytes", "interval_s", "bandwidth_gbs", "plain_gbs")},
            "min_link_gbps": RENTER_MIN_LINK_GBPS,
            "link_counted_bytes": self.hosts.link_bytes() - before_check,  # the proof and its plain all-reduce
        }  # fmt: skip
        by_address = {h.address: h.netns for h in hosts}
        nodes = [
            {"rank": rank, "host": node["ssh_host"], "netns": by_address.get(node["ssh_host"]),
             "lease_id": node["lease_id"], "miner_uid": node["miner_uid"]}
            for rank, node in enumerate(cluster["nodes"])
        ]  # fmt: skip
        script = self.net.workdir / "cluster" / "train_step.py"
        script.write_text(TRAIN_STEP)
        counted = self.hosts.link_bytes()
        command = f"GLOO_SOCKET_IFNAME={LINK_IFNAME} OMP_NUM_THREADS=1 {sys.executable} {script}"
        try:
            ran = self.register(
                store, "cluster", "run", cluster["cluster_id"], "--timeout", "120", "--", command
            )
        finally:
            released = self.register(store, "deallocate", "--cluster", cluster["cluster_id"], "--json")
        crossed = self.hosts.link_bytes() - counted
        train = next(
            (json.loads(line.split("TRAIN ", 1)[1]) for line in ran.stdout.splitlines() if "TRAIN " in line),
            None,
        )
        if ran.returncode != 0 or train is None:
            raise LocalnetError(
                f"--cluster: the training step failed ({ran.returncode}):\n{ran.stdout[-2000:]}{ran.stderr[-2000:]}"
            )
        return {
            "renter_link": renter_link,
            "cluster": {"cluster_id": cluster["cluster_id"], "master_addr": cluster["nodes"][0]["env"]["MASTER_ADDR"],
                        "master_port": cluster["master_port"], "nodes": nodes,
                        "released": released.returncode == 0},
            "train": {
                **{k: round(v, 6) if isinstance(v, float) else v for k, v in train.items()},
                "link_counted_bytes": crossed,  # the whole job on the hosts' link, both ways
            },
            "figures": "recorded by the demo, not proven (the plain localnet proves them)",
        }  # fmt: skip


def cluster_problems(summary: dict[str, Any]) -> list[str]:
    """What makes the demo fail: a link not proven, a wrong reduction, a cluster not released."""
    problems = []
    link, train, cluster = summary.get("link", {}), summary.get("train", {}), summary.get("cluster", {})
    if not link.get("passed"):
        problems.append(f"the link was not proven: {link.get('failures')}")
    if not train.get("matches_every_rank"):
        problems.append("the reduced gradient is not the sum of every rank's")
    if {n.get("netns") for n in cluster.get("nodes", [])} != set(link.get("hosts", [])):
        problems.append("the cluster's nodes are not the demo's two hosts")
    renter_link = summary.get("renter_link", {})
    if not renter_link.get("passed"):
        problems.append(f"the renter's own proof of the rented link failed: {renter_link.get('failures')}")
    for step, figures in (
        ("the proof", link),
        ("the renter's proof", renter_link),
        ("the training step", train),
    ):
        if figures.get("link_counted_bytes", 0) < figures.get(
            "vector_bytes", figures.get("allreduce_bytes", 1)
        ):
            problems.append(f"{step}'s data did not cross the hosts' link")
    if not cluster.get("released"):
        problems.append("deallocate --cluster failed")
    return problems


def render_cluster(summary: dict[str, Any], out: Any) -> None:
    """The people-facing lines (``out``: a rich Console)."""
    link, cluster, train = summary["link"], summary["cluster"], summary["train"]
    verdict = "passed" if link["passed"] else f"FAILED {link['failures']}"
    out.print(
        f"link {link['hosts'][0]} <-> {link['hosts'][1]} ({link['addresses'][0]} <-> {link['addresses'][1]}): "
        f"proof {verdict}, {link['bandwidth_gbs']:.3f} GB/s per link over {link['vector_bytes'] >> 20} MiB "
        f"in {link['interval_s']:.3f} s (plain all-reduce {link['plain_gbs']:.3f} GB/s; "
        f"{link['link_counted_bytes'] / 1e6:.1f} MB counted on the link)"
    )
    out.print(
        f"cluster {cluster['cluster_id']}: MASTER_ADDR={cluster['master_addr']} MASTER_PORT={cluster['master_port']}"
    )
    for node in cluster["nodes"]:
        out.print(
            f"  rank {node['rank']}: {node['host']} ({node['netns']}) miner uid {node['miner_uid']} lease {node['lease_id'][:12]}"
        )
    mine = summary["renter_link"]
    out.print(
        f"  the renter's own proof across its leases: {'passed' if mine['passed'] else 'FAILED'}, "
        f"{mine['bandwidth_gbs']:.3f} GB/s per link ({mine['bandwidth_gbs'] * 8:.2f} Gbit/s; kept at "
        f"--min-link-gbps {mine['min_link_gbps']:g}; plain all-reduce {mine['plain_gbs'] or 0:.3f} GB/s; "
        f"{mine['link_counted_bytes'] / 1e6:.1f} MB counted on the link)"
    )
    out.print(
        f"training step: {train['params']:,} parameters, mean loss {train['loss_mean']:.4f}, reduced gradient norm "
        f"{train['grad_sum_norm']:.4f} (the sum of every rank's: {train['matches_every_rank']}), all-reduce "
        f"{train['allreduce_bytes'] / 1e6:.1f} MB in {train['allreduce_s']:.3f} s = {train['allreduce_gbs']:.3f} GB/s per link "
        f"({train['link_counted_bytes'] / 1e6:.1f} MB counted on the link)"
    )
    out.print(f"compute figures: {summary['figures']}; released: {cluster['released']}")


def run_cluster_demo(args: Any, repo_root: Path, console: Any) -> int:
    """``localnet --cluster`` (``args``: the localnet parser's): run, print, exit status."""
    from rich.console import Console
    from rich.markup import escape
    from rich.text import Text

    from .processes import signal_number, stop_on_signals

    alone = {"--cheaters": args.cheaters, "--collateral": args.collateral, "--hosts 2": args.hosts > 1,
             "--backend docker": args.backend != "embedded", "--dashboard": args.dashboard, "--hold": args.hold,
             "--latency-ms": args.latency_ms, "--validators": args.validators > 1}  # fmt: skip
    named = [flag for flag, value in alone.items() if value]
    if named:
        console.print(
            f"--cluster runs alone (its own two hosts, one validator); leave out {', '.join(named)}"
        )
        return 2
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )

    def show(name: str, line: str) -> None:
        console.print(Text.assemble((f"[{name}] ", "dim"), line), highlight=False, soft_wrap=True)

    options = ClusterOptions(workdir=args.workdir, timeout_s=args.timeout or 240.0, debug=args.debug)
    stop_on_signals()
    demo = ClusterDemo(options, repo_root, on_line=show)
    started = time.monotonic()
    try:
        summary = demo.run()
    except LocalnetError as exc:
        console.print(f"[red]localnet failed:[/red] {escape(str(exc))}")
        return 1
    except KeyboardInterrupt as interrupt:
        signum = signal_number(interrupt)
        console.print(f"[yellow]{signal.Signals(signum).name}: stopping[/yellow]")
        return 128 + signum
    finally:
        demo.stop()
    summary["elapsed_s"] = round(time.monotonic() - started, 1)
    problems = cluster_problems(summary)
    summary["ok"], summary["problems"] = not problems, problems
    if args.json:
        print(json.dumps(summary, indent=2), flush=True)
    else:
        render_cluster(summary, Console(width=None if sys.stdout.isatty() else 160))
        for problem in problems:
            console.print(f"[red]problem:[/red] {escape(problem)}")
    return 1 if problems else 0
