"""Every lab command by name: ``python -m compute bench <name> [--json]``.

Each target is ``"module:function"``, a ``main(argv: list[str] | None) -> int`` whose module is
imported only when its command runs (torch, web3 or Docker stay unimported for the others). To add a
benchmark, write ``compute/lab/bench/<thing>.py`` with a ``main`` and add one line here.
"""

from __future__ import annotations

from typing import NamedTuple


class Entry(NamedTuple):
    target: str  # "module:function"
    help: str


ENTRIES: dict[str, Entry] = {
    "pog": Entry("compute.lab.bench.pog:main", "PoG prover overhead over a plain GEMM, verifier cost"),
    "pog-gen": Entry("compute.lab.bench.pog_gen:main", "PoG input generator and Merkle hashing speed"),
    "pog-verify": Entry("compute.lab.bench.pog_verify:main", "PoG verifier cost at the H100 shapes"),
    "pog-verdicts": Entry(
        "compute.lab.bench.pog_verdicts:main", "honest and shortcut GEMM errors against the tolerance"
    ),
    "pog-depth": Entry(
        "compute.lab.bench.pog_depth:main", "memory, sustained, scaling and host proof figures"
    ),
    "transport": Entry("compute.lab.bench.transport:main", "the signed HTTP transport: latency, throughput"),
    "allocation": Entry("compute.lab.bench.allocation:main", "lease allocation and release"),
    "hardening": Entry(
        "compute.lab.bench.hardening:main", "flood, kill -9 loops and tenant isolation figures"
    ),
    "dashboard": Entry(
        "compute.lab.bench.dashboard:main", "the dashboard's first render (and under a flood)"
    ),
    "feed": Entry("compute.lab.bench.feed:main", "the public machine feed: build time and size"),
    "collateral-gas": Entry(
        "compute.lab.bench.collateral_gas:main", "gas per collateral operation on the in-process EVM"
    ),
    "validator": Entry("compute.lab.bench.validator:main", "one validator round against local miners"),
    "distance": Entry(
        "compute.lab.bench.distance:main",
        "an honest miner proven from near and far (latency proxy), optionally under a dashboard flood",
    ),
    "rise-proxy": Entry(
        "compute.lab.bench.rise_proxy:run_proxy",
        "the latency proxy whose way back rises during the session (distance --far-e2e's SSH path)",
    ),
    "interconnect": Entry(
        "compute.lab.bench.interconnect:main",
        "the interconnect proof's bandwidth vs a plain all-reduce on the same links; verify CPU",
    ),
    "cluster-allocate": Entry(
        "compute.lab.bench.cluster_allocate:main", "N leases all or none, reachable: vs one"
    ),
    "check-cost": Entry("compute.lab.bench.check_cost:main", "GPU seconds of one test's GEMM proofs"),
    "fleet": Entry(
        "compute.lab.bench.fleet:main", "one real validator round against N simulated 8-GPU miners"
    ),
    "agreement-sim": Entry(
        "compute.lab.sim.agreement:main", "validators' agreement vs noise and design; validation load"
    ),
    "presence-sim": Entry(
        "compute.lab.sim.presence:main", "credit of one device behind 1-32 hotkeys, hit and run, load"
    ),
    "canary-sim": Entry(
        "compute.lab.sim.canary:main", "availability a renter-refusing miner keeps; canaries' load"
    ),
}
