"""The validator's collateral files: lease reports, its own signed probes, evidence, outcomes,
and which incident each of its own proven cheats backs.

One directory (``<data_dir>/collateral``), one JSON file per item, each written atomically
(``os.replace``), so the evidence surface, running in its own thread, only ever reads whole files
and never blocks the desk. Content-addressed evidence (``evidence/<keccak>.json``) is immutable.
Everything here was signed by someone else or by this validator before it was written; this
module only keeps it. Reports past their term and closed outcomes are pruned after ``keep_s``.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from compute.collateral import EvidenceError
from compute.collateral.evidence import LeaseProbe, SignedEvidence, evidence_hash, parse_signed
from compute.collateral.lease import LeaseReport, ReportedLease, check_report

log = logging.getLogger(__name__)
MAX_REPORTS = 256  # leases watched at once; more reports are refused until some term ends
MAX_EVIDENCE = 1024
_NAME = re.compile(r"^[0-9a-f]{32,64}$")


class BookFull(Exception):
    """The book watches ``MAX_REPORTS`` leases already."""


@dataclass(frozen=True)
class Watched:
    report: LeaseReport
    lease: ReportedLease


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


class CollateralBook:
    def __init__(self, root: Path, keep_s: float = 7 * 86_400.0) -> None:
        self.root = Path(root)
        self.keep_s = keep_s
        for name in ("reports", "probes", "evidence", "outcomes", "backing"):
            (self.root / name).mkdir(parents=True, exist_ok=True)

    # ---------------------------------------------------------------- lease reports

    def add_report(self, report: LeaseReport, now: float) -> Watched:
        """Check and keep a renter's report (idempotent); EvidenceError or BookFull when refused."""
        lease = check_report(report)
        if now > lease.term_end:
            raise EvidenceError("the lease's signed term has ended")
        path = self.root / "reports" / f"{lease.lease_id}.json"
        if not path.exists():
            if sum(1 for _ in self._names("reports")) >= MAX_REPORTS:
                raise BookFull(f"{MAX_REPORTS} leases are watched already")
            body = {"term_end": lease.term_end, "report": report.model_dump(mode="json")}
            _write(path, json.dumps(body, sort_keys=True))
            log.info(
                "collateral lease=%s miner=%s reported dead by its renter",
                lease.lease_id,
                lease.miner_hotkey[:10],
            )
        return Watched(report, lease)

    def reports(self) -> list[Watched]:
        out = []
        for name in self._names("reports"):
            raw = self._read("reports", name) or {}
            try:
                report = LeaseReport.model_validate(raw["report"])
                out.append(Watched(report, check_report(report)))
            except (KeyError, TypeError, ValidationError, EvidenceError) as error:
                log.warning("collateral report %s unreadable, dropped: %s", name, error)
                (self.root / "reports" / f"{name}.json").unlink(missing_ok=True)
        return out

    def raw_reports(self, now: float) -> list[dict]:
        """Reports still in their term, as stored (the surface's ``/collateral/watch``)."""
        out = []
        for name in self._names("reports"):
            raw = self._read("reports", name)
            if isinstance(raw, dict) and float(raw.get("term_end", 0)) >= now:
                out.append(raw["report"])
        return out

    # ---------------------------------------------------------------- own probes

    def set_probe(self, probe: LeaseProbe) -> None:
        _write(self.root / "probes" / f"{probe.lease_id}.json", probe.model_dump_json())

    def probe(self, lease_id: str) -> LeaseProbe | None:
        raw = self._read("probes", lease_id) if _NAME.fullmatch(lease_id) else None
        return LeaseProbe.model_validate(raw) if raw is not None else None

    # ---------------------------------------------------------------- evidence

    def add_evidence(self, signed: SignedEvidence) -> str:
        digest = evidence_hash(signed.evidence).hex()
        path = self.root / "evidence" / f"{digest}.json"
        if not path.exists() and sum(1 for _ in self._names("evidence")) < MAX_EVIDENCE:
            _write(path, signed.model_dump_json())
        return digest

    def evidence(self, digest: str) -> SignedEvidence | None:
        raw = self._read("evidence", digest) if _NAME.fullmatch(digest) else None
        if raw is None:
            return None
        try:
            return parse_signed(json.dumps(raw))
        except EvidenceError:
            return None

    def all_evidence(self) -> dict[str, SignedEvidence]:
        out = {}
        for name in self._names("evidence"):
            signed = self.evidence(name)
            if signed is not None:
                out[name] = signed
        return out

    def raw_evidence(self, digest: str | None = None) -> list[dict]:
        names = [digest] if digest is not None else list(self._names("evidence"))
        return [raw for name in names if _NAME.fullmatch(name) and (raw := self._read("evidence", name))]

    # ---------------------------------------------------------------- outcomes

    def outcome(self, key: str) -> str | None:
        raw = self._read("outcomes", key) if _NAME.fullmatch(key) else None
        return str(raw["outcome"]) if isinstance(raw, dict) else None

    def set_outcome(self, key: str, outcome: str, now: float) -> None:
        _write(self.root / "outcomes" / f"{key}.json", json.dumps({"outcome": outcome, "at": now}))

    # ---------------------------------------------------------------- own proofs and incidents

    def backing(self, verdict: str) -> str | None:
        """The incident (hex) this validator's own proven cheat ``verdict`` (its digest) backs."""
        raw = self._read("backing", verdict) if _NAME.fullmatch(verdict) else None
        return str(raw["incident"]) if isinstance(raw, dict) else None

    def set_backing(self, verdict: str, incident: str) -> None:
        if _NAME.fullmatch(verdict):
            _write(self.root / "backing" / f"{verdict}.json", json.dumps({"incident": incident}))

    def prune(self, now: float) -> None:
        """Forget reports whose term ended ``keep_s`` ago, and their probes."""
        for name in list(self._names("reports")):
            raw = self._read("reports", name)
            if not isinstance(raw, dict) or float(raw.get("term_end", 0)) + self.keep_s < now:
                (self.root / "reports" / f"{name}.json").unlink(missing_ok=True)
                (self.root / "probes" / f"{name}.json").unlink(missing_ok=True)

    # ---------------------------------------------------------------- files

    def _names(self, kind: str) -> Iterator[str]:
        for path in sorted((self.root / kind).glob("*.json")):
            if _NAME.fullmatch(path.stem):
                yield path.stem

    def _read(self, kind: str, name: str) -> dict | None:
        try:
            raw = json.loads((self.root / kind / f"{name}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return raw if isinstance(raw, dict) else None


def default_root(data_dir: Path) -> Path:
    return Path(data_dir) / "collateral"


__all__ = ["BookFull", "CollateralBook", "MAX_REPORTS", "Watched", "default_root"]
