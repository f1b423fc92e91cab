"""Collateral on Bittensor's EVM: the contract's client, evidence, keys and the credit ramp.

Pure parts (errors, identity, credit) import nothing beyond the SDK; the web3 parts (client,
deploy, local chain) need the ``collateral`` extra (``pip install -e ".[collateral]"``) and are
imported on first use, so packages that only read the facade do not need web3.
See docs/collateral.md.
"""

from __future__ import annotations

import importlib
from typing import Any

from compute.collateral.credit import DEFAULT_FLOOR, collateral_factor
from compute.collateral.errors import (
    BuildError,
    ChainUnavailable,
    CollateralError,
    ContractReverted,
    EvidenceError,
    EvmKeyError,
)
from compute.collateral.identity import checked_h160, h160_to_ss58, hotkey_bytes32
from compute.collateral.windows import Windows, covered_until

_LAZY = {
    "CollateralClient": "compute.collateral.chain",
    "CollateralConfig": "compute.collateral.chain",
    "DepositState": "compute.collateral.chain",
    "SlashProposal": "compute.collateral.chain",
    "TxResult": "compute.collateral.chain",
    "KIND_FAILED_RENTAL": "compute.collateral.chain",
    "KIND_CHEAT": "compute.collateral.chain",
    "deploy_stack": "compute.collateral.deploy",
    "Stack": "compute.collateral.deploy",
    "Mirror": "compute.collateral.deploy",
    "local_chain": "compute.collateral.devchain",
    "LocalChain": "compute.collateral.devchain",
    "LocalEvm": "compute.collateral.devchain",
    "serve_local": "compute.collateral.devchain",
    "load_account": "compute.collateral.keys",
    "FailedRentalEvidence": "compute.collateral.evidence",
    "CheatEvidence": "compute.collateral.evidence",
    "SignedEvidence": "compute.collateral.evidence",
    "LeaseProbe": "compute.collateral.evidence",
    "sign_probe": "compute.collateral.evidence",
    "sign_evidence": "compute.collateral.evidence",
    "parse_signed": "compute.collateral.evidence",
    "check_evidence": "compute.collateral.evidence",
    "evidence_hash": "compute.collateral.evidence",
    "incident_of": "compute.collateral.evidence",
    "Roster": "compute.collateral.evidence",
    "LeaseReport": "compute.collateral.lease",
    "ReportedLease": "compute.collateral.lease",
    "SignedLease": "compute.collateral.lease",
    "check_report": "compute.collateral.lease",
    "released_at": "compute.collateral.lease",
}

__all__ = [
    "DEFAULT_FLOOR",
    "BuildError",
    "ChainUnavailable",
    "CollateralError",
    "ContractReverted",
    "EvidenceError",
    "EvmKeyError",
    "checked_h160",
    "collateral_factor",
    "h160_to_ss58",
    "hotkey_bytes32",
    "Windows",
    "covered_until",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'compute.collateral' has no attribute {name!r}")
    attr = "check" if name == "check_evidence" else name
    return getattr(importlib.import_module(module), attr)
