"""Validator: Proof-of-GPU rounds over SSH inside validation leases, scoring, weight setting."""

from __future__ import annotations

from compute.validator.depth import DepthParams, DepthRejected, sustained_due
from compute.validator.evidence import Measured, scored_result
from compute.validator.loop import (
    BlockLoop,
    LoopRunner,
    RoundLoop,
    WeightsLoop,
    chain_block_source,
    score_updates,
    select_targets,
)
from compute.validator.oversight import Oversight
from compute.validator.pog_session import (
    BOOTSTRAP,
    PogSession,
    PogSessionError,
    SshFailed,
    WorkerFailed,
    WorkerProtocolError,
    WorkerTimeout,
    bootstrap_command,
)
from compute.validator.round import (
    MinerTarget,
    RoundParams,
    challenge_size,
    check_miner,
    rented_sample,
    round_params,
)
from compute.validator.schedule import check_probability, round_spread, validation_load
from compute.validator.settings import (
    ValidatorSettings,
    add_validator_args,
    parse_validator,
    validator_from_args,
)
from compute.validator.table import print_round_table, round_table
from compute.validator.timing import chain_block_seconds, measure_block_seconds, round_step_timeout
from compute.validator.wandb_log import WandbLogger, result_figures, wandb_wanted
from compute.validator.weights import WeightsError, WeightSetter, weights_from_scores

__all__ = [
    "Oversight",
    "BOOTSTRAP",
    "BlockLoop",
    "DepthParams",
    "DepthRejected",
    "LoopRunner",
    "Measured",
    "MinerTarget",
    "PogSession",
    "PogSessionError",
    "RoundLoop",
    "RoundParams",
    "SshFailed",
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
    "challenge_size",
    "chain_block_seconds",
    "chain_block_source",
    "check_miner",
    "check_probability",
    "measure_block_seconds",
    "parse_validator",
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
    "sustained_due",
    "validation_load",
    "validator_from_args",
    "weights_from_scores",
]
