"""Why a miner scored what it did: the validators' signed verdicts, kept and shown to its operator.

Each round a validator sends every miner it tested a ``VerdictRequest`` (ok, sample, reasons, the
figures it measured on its own clock). The miner logs one line per verdict and appends the request
*as signed* (path, raw body, btauth/1 headers) to ``verdicts.jsonl`` in its data directory (the
newest ``KEEP`` are kept), so ``python -m compute miner-report`` can later re-verify who said what:
a verdict whose signature does not verify is shown as such, never trusted. The miner acts on
nothing here; a verdict is an explanation, not an instruction.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bittensor import http_auth
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table
from rich.text import Text

from compute.argv import Parser, count
from compute.protocol import ROUTES, SignedRequest, VerdictRequest

log = logging.getLogger(__name__)

FILE_NAME = "verdicts.jsonl"
KEEP = 500
VERDICT_PATH = ROUTES[VerdictRequest][0]


@dataclass(frozen=True)
class Verdict:
    """One verdict as kept: the validator that signed it (None: it does not verify) and what it said."""

    validator: str | None
    received_at: float
    request: VerdictRequest


class VerdictLog:
    """``verdicts.jsonl`` under a miner's data directory (append, bounded, one writer per process)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def record(self, signed: SignedRequest | None, verdict: VerdictRequest, validator: str) -> None:
        """Log the verdict in one line and keep it as signed (without a signature: logged only)."""
        first = verdict.reasons[0] if verdict.reasons else ""
        log.info(
            "verdict validator=%s round=%d %s sample=%.4g%s",
            validator,
            verdict.round_id,
            "ok" if verdict.ok else "FAILED",
            verdict.sample,
            f" reason={first}" if first else "",
        )
        if signed is None:
            return
        line = json.dumps({"received_at": time.time(), "signed": signed.model_dump()}, separators=(",", ":"))
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as out:
                out.write(line + "\n")
            self._trim()

    def _trim(self) -> None:
        lines = self.path.read_text(encoding="utf-8").splitlines()
        if len(lines) > 2 * KEEP:  # rewrite once in a while, not on every verdict
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text("\n".join(lines[-KEEP:]) + "\n", encoding="utf-8")
            os.replace(tmp, self.path)

    def read(self, miner_hotkey: str) -> list[Verdict]:
        """Every kept verdict, oldest first, each signature re-verified for ``miner_hotkey``."""
        if not self.path.exists():
            return []
        out = []
        for raw in self.path.read_text(encoding="utf-8").splitlines()[-KEEP:]:
            kept = _parse(raw)
            if kept is not None:
                received_at, signed, request = kept
                out.append(Verdict(signer(signed, miner_hotkey), received_at, request))
        return out


def _parse(raw: str) -> tuple[float, SignedRequest, VerdictRequest] | None:
    try:
        entry = json.loads(raw)
        signed = SignedRequest.model_validate(entry["signed"])
        return float(entry["received_at"]), signed, VerdictRequest.model_validate_json(signed.body)
    except (ValueError, KeyError, TypeError, ValidationError):
        return None  # a torn or edited line is skipped, never trusted


class _AnyNonce:
    def check_and_store(self, hotkey_ss58: str, nonce_ns: int) -> bool:
        return True


def signer(signed: SignedRequest, miner_hotkey: str) -> str | None:
    """The validator hotkey whose signature over these exact bytes verifies (for ``miner_hotkey``)."""
    headers = {k.lower(): v for k, v in signed.headers.items()}
    try:
        nonce = int(headers.get(http_auth.HEADER_NONCE.lower(), ""))
        caller = http_auth.verify(
            signed.headers,
            signed.body.encode(),
            method="POST",
            path=signed.path,
            self_hotkey_ss58=miner_hotkey,
            nonce_store=_AnyNonce(),
            now_ns=nonce,  # the signature itself, not its freshness: the verdict is old
        )
    except (ValueError, http_auth.AuthError):
        return None
    return caller.hotkey_ss58 if signed.path == VERDICT_PATH else None


EXPLAINED = "terms: "  # the reason a validator puts first: its sample's terms in one line


def _explanation(reasons: list[str]) -> str | None:
    """The sample's terms the validator sent (``compute.scoring.explain``), if it sent them."""
    return reasons[0][len(EXPLAINED) :] if reasons and reasons[0].startswith(EXPLAINED) else None


def _why(row: dict[str, Any]) -> Text:
    """The explanation in full, then the validator's first other reason."""
    others = row["reasons"][1:] if row["explanation"] else row["reasons"]
    lines = [row["explanation"]] if row["explanation"] else []
    return Text("\n".join([*lines, *others[:1]]) or "-")


def _rows(verdicts: list[Verdict], last: int) -> list[dict[str, Any]]:
    rows = []
    for v in reversed(verdicts[-last:] if last else verdicts):
        f = v.request.figures
        rows.append(
            {
                "validator": v.validator,
                "verified": v.validator is not None,
                "received_at": v.received_at,
                "round": v.request.round_id,
                "ok": v.request.ok,
                "sample": v.request.sample,
                "score": v.request.score,
                "reasons": list(v.request.reasons),
                "explanation": _explanation(v.request.reasons),
                "figures": f.model_dump(exclude_none=True),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = Parser(
        prog="python -m compute miner-report",
        description="the validators' verdicts on this miner: why it scored what it did",
    )
    parser.add_argument(
        "--miner.data_dir", dest="data_dir", default="~/.compute/miner", help="miner data dir"
    )
    parser.add_argument(
        "--hotkey", required=True, help="this miner's hotkey (ss58): signatures are checked for it"
    )
    parser.add_argument(
        "--last", type=count, default=20, help="newest verdicts to show (0 = all kept; default 20)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    path = Path(os.path.expanduser(args.data_dir)) / FILE_NAME
    rows = _rows(VerdictLog(path).read(args.hotkey), max(0, args.last))
    if args.json:
        print(json.dumps({"file": str(path), "verdicts": rows}, indent=2))
        return 0
    console = Console(width=None if sys.stdout.isatty() else 160)
    if not rows:
        console.print(f"no verdicts yet in {path}")
        return 0
    table = Table(title=f"verdicts on {args.hotkey[:10]}... (newest first)", show_lines=True)
    for column in ("when", "validator", "round", "verdict", "sample", "why"):
        table.add_column(column)
    for row in rows:
        who = row["validator"][:10] + "..." if row["validator"] else "[red]signature does not verify[/red]"
        table.add_row(
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(row["received_at"])),
            who,
            str(row["round"]),
            "ok" if row["ok"] else "[red]failed[/red]",
            f"{row['sample']:.4g}",
            _why(row),
        )
    console.print(table)
    return 0


__all__ = ["FILE_NAME", "Verdict", "VerdictLog", "main", "signer"]
