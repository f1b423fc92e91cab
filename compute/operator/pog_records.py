"""Read-only view of a validator's Proof-of-GPU results: which GPUs each miner has *proved*.

Reads the validator store (``compute.store``) through ``compute.store.verified_machines``, which
opens the SQLite file strictly read-only (``mode=ro`` URI, so a running validator is never
blocked or modified) and checks its schema version, and returns, per hotkey, the GPU model and
count of its latest passing, non-rented PoG result. Accepts the database file or a directory
holding it (``--validator.data_dir``), where the first ``*.db`` that reads as a validator store
wins.

``fresh_proofs`` drops proofs older than the renter's limit (``--register.max_proof_age``, from any
source: a store, a dashboard, a feed): a machine proven a week ago may have left since, so its old
figures neither mark it verified nor place it in a cluster.

Deliberately not here: SQL, writing, scoring, or trusting anything a miner merely reported.
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

from compute.operator.discovery import VerifiedGpus
from compute.operator.errors import UsageError
from compute.store import PogResult, SchemaMismatch, StoreError, verified_machines

logger = logging.getLogger(__name__)

DEFAULT_MAX_PROOF_AGE_H = 24.0  # a validator re-proves every machine each round (about an hour)


def fresh_proofs(
    verified: dict[str, VerifiedGpus], now: float, max_age_h: float, source: str
) -> dict[str, VerifiedGpus]:
    """The proofs of ``verified`` at most ``max_age_h`` hours old (0: any age); says what it dropped."""
    if max_age_h <= 0:
        return verified
    oldest = now - max_age_h * 3600.0
    kept = {hotkey: proof for hotkey, proof in verified.items() if proof.verified_at >= oldest}
    dropped = len(verified) - len(kept)
    if dropped:
        newest = max(p.verified_at for h, p in verified.items() if h not in kept)
        logger.warning(
            "%s: %d machine proof(s) older than %g h not used, the newest of them %.1f h old "
            "(--register.max_proof_age)",
            source,
            dropped,
            max_age_h,
            (now - newest) / 3600.0,
        )
    return kept


def _read(db: Path) -> dict[str, PogResult]:
    try:
        return verified_machines(db)
    except SchemaMismatch as exc:
        raise UsageError(f"validator store schema does not match: {exc}") from exc
    except StoreError as exc:
        raise UsageError(f"cannot read PoG results from {db}: {exc}") from exc


def _read_dir(directory: Path) -> tuple[Path, dict[str, PogResult]]:
    for candidate in sorted(directory.glob("*.db")):
        try:
            return candidate, verified_machines(candidate)
        except SchemaMismatch as exc:
            raise UsageError(f"validator store schema does not match: {exc}") from exc
        except StoreError:
            continue  # another kind of database: keep looking
    raise UsageError(f"no validator database with PoG results found in {directory}")


def load_verified(path: str | Path) -> dict[str, VerifiedGpus]:
    """Latest verified GPUs per miner hotkey from the validator store at ``path`` (file or dir)."""
    target = Path(path).expanduser()
    if target.is_file():
        db, results = target, _read(target)
    elif target.is_dir():
        db, results = _read_dir(target)
    else:
        raise UsageError(f"PoG database {target} does not exist")
    verified: dict[str, VerifiedGpus] = {}
    for hotkey, result in results.items():
        if result.gpu_count <= 0 or not result.models:
            continue
        model = Counter(result.models).most_common(1)[0][0]
        verified[hotkey] = VerifiedGpus(
            hotkey,
            model,
            int(result.gpu_count),
            float(result.created),
            tflops_fp16=result.tflops_fp16,
            tflops_fp32=result.tflops_fp32,
            memory_gb=result.mem_proven_gb,
            bandwidth_gbs=result.mem_gbs,
        )
    logger.debug("loaded verified machines=%d from %s", len(verified), db)
    return verified
