"""Read-only view of a validator's Proof-of-GPU results: which GPUs each miner has *proved*.

Opens the validator store (``compute.store``) SQLite file strictly read-only (``mode=ro`` URI,
so a running validator is never blocked or modified) and returns, per hotkey, the GPU model and
count of its latest passing, non-rented PoG result. Accepts the database file or a directory
holding it (``--validator.data_dir``), where the first ``*.db`` with a ``pog_results`` table wins.

Deliberately not here: writing, scoring, or trusting anything a miner merely reported.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections import Counter
from contextlib import closing
from pathlib import Path

from compute.operator.discovery import VerifiedGpus
from compute.operator.errors import UsageError
from compute.store import SCHEMA_VERSION

logger = logging.getLogger(__name__)

_LATEST_VERIFIED = """
SELECT r.hotkey, r.models, r.gpu_count, r.created
FROM pog_results AS r
JOIN (
    SELECT hotkey, MAX(round_id) AS round_id FROM pog_results
    WHERE ok = 1 AND rented = 0 AND gpu_count > 0 GROUP BY hotkey
) AS latest ON latest.hotkey = r.hotkey AND latest.round_id = r.round_id
"""


def _has_results(path: Path) -> bool:
    try:
        with closing(_open(path)) as conn:
            return conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type='table' AND name='pog_results'"
            ).fetchone() is not None
    except sqlite3.Error:
        return False


def _open(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5.0)


def resolve_db(path: str | Path) -> Path:
    """The validator database named by ``path`` (a file, or a directory that holds one)."""
    target = Path(path).expanduser()
    if target.is_file():
        return target
    if target.is_dir():
        for candidate in sorted(target.glob("*.db")):
            if _has_results(candidate):
                return candidate
        raise UsageError(f"no validator database with PoG results found in {target}")
    raise UsageError(f"PoG database {target} does not exist")


def load_verified(path: str | Path) -> dict[str, VerifiedGpus]:
    """Latest verified GPUs per miner hotkey from the validator store at ``path``."""
    db = resolve_db(path)
    try:
        with closing(_open(db)) as conn:
            row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            if row is None or int(row[0]) != SCHEMA_VERSION:
                found = None if row is None else row[0]
                raise UsageError(f"{db}: validator store schema {found}, expected {SCHEMA_VERSION}")
            rows = conn.execute(_LATEST_VERIFIED).fetchall()
    except sqlite3.Error as exc:
        raise UsageError(f"cannot read PoG results from {db}: {exc}") from exc
    verified: dict[str, VerifiedGpus] = {}
    for hotkey, models_json, gpu_count, created in rows:
        try:
            models = [str(m) for m in json.loads(models_json)]
        except (ValueError, TypeError):
            logger.warning("skipping unreadable PoG models hotkey=%s", hotkey)
            continue
        if not models:
            continue
        model = Counter(models).most_common(1)[0][0]
        verified[hotkey] = VerifiedGpus(hotkey, model, int(gpu_count), float(created))
    logger.debug("loaded verified machines=%d from %s", len(verified), db)
    return verified
