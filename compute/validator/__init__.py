"""Validator: Proof-of-GPU rounds over SSH inside validation leases, scoring, weight setting.

Rooms, lowest first (a room imports only rooms below it; ``tests/test_layers.py`` holds the order):
the root modules ``settings``, ``params``, ``failures``; ``session`` (SSH channel to the worker) and
``report`` (table, progress, wandb) and ``journal`` (every granted lease released); ``rentals`` (receipts, canaries, ledger); ``fleet`` (dedup,
oversight); ``context`` (``ValidatorContext``: the validator's shared collaborators, built once
by the entry point and passed to every loop); ``proofs`` (GEMM, depth, hosts, evidence);
``lockstep`` (the window every timed proof runs in, at one moment, and the exclusivity judge); ``check`` (one miner's test); ``round``
(loops, schedule, windows, weights); ``presence`` (presence checks of every miner at moments
drawn at random; credit = capacity x presence); ``collateral`` (deposits into credit, the failed-rental desk; off without
``--collateral.rpc``); ``tools`` (simulations and benchmarks).
"""

from __future__ import annotations

from compute.validator.check.context import MinerCheck
from compute.validator.check.miner import check_miner
from compute.validator.check.rented import rented_sample
from compute.validator.context import ValidatorContext
from compute.validator.fleet.oversight import Oversight
from compute.validator.journal import JournaledClient, ReleasePass, new_run_id, release_due
from compute.validator.params import DepthParams, MinerTarget, RoundParams, round_params
from compute.validator.presence.loop import PresenceLoop
from compute.validator.presence.schedule import presence_interval, split_budget
from compute.validator.proofs.depth import DepthRejected, sustained_due
from compute.validator.proofs.evidence import Measured, scored_result
from compute.validator.proofs.sizing import challenge_size
from compute.validator.rentals.canary import CanaryRenter, CanaryTiming, canary_identities
from compute.validator.report.table import print_round_table, round_table
from compute.validator.report.wandb_log import WandbLogger, result_figures, wandb_wanted
from compute.validator.round.loop import (
    BlockLoop,
    LoopRunner,
    RoundLoop,
    WeightsLoop,
    chain_block_source,
    score_updates,
    select_targets,
)
from compute.validator.round.releases import ReleaseLoop
from compute.validator.round.schedule import RoundSchedule, check_probability, round_spread, validation_load
from compute.validator.round.timing import chain_block_seconds, measure_block_seconds, round_step_timeout
from compute.validator.round.weights import WeightsError, WeightSetter, weights_from_scores
from compute.validator.session.pog_session import (
    BOOTSTRAP,
    PogSession,
    PogSessionError,
    SshFailed,
    WorkerFailed,
    WorkerProtocolError,
    WorkerTimeout,
    bootstrap_command,
)
from compute.validator.settings import (
    ValidatorSettings,
    add_validator_args,
    parse_validator,
    validator_from_args,
)

__all__ = [
    "CanaryRenter",
    "CanaryTiming",
    "Oversight",
    "BOOTSTRAP",
    "BlockLoop",
    "DepthParams",
    "DepthRejected",
    "JournaledClient",
    "LoopRunner",
    "Measured",
    "MinerCheck",
    "MinerTarget",
    "PogSession",
    "PogSessionError",
    "PresenceLoop",
    "ReleaseLoop",
    "ReleasePass",
    "RoundLoop",
    "RoundParams",
    "RoundSchedule",
    "SshFailed",
    "ValidatorContext",
    "ValidatorSettings",
    "WandbLogger",
    "wandb_wanted",
    "WeightSetter",
    "WeightsError",
    "WeightsLoop",
    "WorkerFailed",
    "WorkerProtocolError",
    "WorkerTimeout",
    "add_validator_args",
    "bootstrap_command",
    "canary_identities",
    "challenge_size",
    "chain_block_seconds",
    "chain_block_source",
    "check_miner",
    "check_probability",
    "measure_block_seconds",
    "new_run_id",
    "release_due",
    "parse_validator",
    "presence_interval",
    "print_round_table",
    "rented_sample",
    "result_figures",
    "round_params",
    "round_spread",
    "round_step_timeout",
    "round_table",
    "score_updates",
    "scored_result",
    "select_targets",
    "split_budget",
    "sustained_due",
    "validation_load",
    "validator_from_args",
    "weights_from_scores",
]
