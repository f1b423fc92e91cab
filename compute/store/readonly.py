"""Read-only queries on a validator store file, for other processes (operator CLI, dashboards).

Opens the SQLite file with a ``mode=ro`` URI, so a running validator is never blocked or
modified and a missing file is never created, and checks the schema version before reading.

Deliberately not here: writing, caching, or finding the file (callers pass its path).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

from compute.store.records import PogResult
from compute.store.store import _RESULT_COLUMNS, SCHEMA_VERSION, SchemaMismatch, StoreError, _result

log = logging.getLogger(__name__)

_LATEST_VERIFIED = f"""
SELECT {", ".join("r." + c for c in _RESULT_COLUMNS)} FROM pog_results AS r
JOIN (
    SELECT hotkey, MAX(round_id) AS round_id FROM pog_results
    WHERE ok = 1 AND rented = 0 GROUP BY hotkey
) AS latest ON latest.hotkey = r.hotkey AND latest.round_id = r.round_id
WHERE r.ok = 1 AND r.rented = 0
ORDER BY r.hotkey, r.uid
"""


@contextmanager
def open_readonly(path: str | Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection to the validator store at ``path``, its schema version checked.

    Raises ``StoreError`` when the file does not exist or is not a validator store,
    ``SchemaMismatch`` when another schema version wrote it.
    """
    db = Path(path).expanduser()
    if not db.is_file():
        raise StoreError(f"validator store {db} does not exist")
    try:
        with closing(sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=5.0)) as conn:
            row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            if row is None or str(row[0]) != str(SCHEMA_VERSION):
                found = None if row is None else row[0]
                raise SchemaMismatch(f"{db}: schema {found}, this code expects {SCHEMA_VERSION}")
            yield conn
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read validator store {db}: {exc}") from exc


def verified_machines(path: str | Path) -> dict[str, PogResult]:
    """Per miner hotkey, its latest passing, non-rented PoG result in the store at ``path``.

    Raises ``StoreError`` when the file does not exist or cannot be read as a validator store,
    ``SchemaMismatch`` when it was written by another schema version.
    """
    db = Path(path).expanduser()
    try:
        with open_readonly(db) as conn:
            rows = conn.execute(_LATEST_VERIFIED).fetchall()
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read validator store {db}: {exc}") from exc
    verified: dict[str, PogResult] = {}
    for row in rows:
        try:
            result = _result(row)
        except (ValueError, TypeError) as exc:  # a corrupt JSON column: skip that row only
            log.warning("skipping unreadable PoG result hotkey=%s in %s: %s", row[2], db, exc)
            continue
        verified[result.hotkey] = result
    return verified
