"""Typed prover facade: ``Prover(device).commit(Challenge) -> Commitment``, ``.open(...)``.

A thin wrapper over ``engine.ProverEngine`` (the same code the worker script runs), converting
between the pydantic wire models and the engine's plain dicts. Used in-process by tests, the
benchmark and the local demo; in production the validator runs ``worker_script()`` on the miner.
"""

from __future__ import annotations

from .engine import EngineError, ProverEngine
from .wire import Challenge, Commitment, Opening, OpeningRequest


class ProverError(RuntimeError):
    """The prover refused or failed a request (no commitment, wrong challenge, no device)."""


class Prover:
    def __init__(self, device: str = "auto", threads: int | None = None) -> None:
        try:
            self._engine = ProverEngine(device, threads)
        except EngineError as exc:
            raise ProverError(str(exc)) from exc

    @property
    def device(self) -> str:
        return self._engine.device

    @property
    def threads(self) -> int:
        return self._engine.threads

    def info(self) -> dict:
        return self._engine.info()

    def commit(self, challenge: Challenge) -> Commitment:
        try:
            return Commitment.model_validate(self._engine.commit(challenge.model_dump()))
        except EngineError as exc:
            raise ProverError(str(exc)) from exc

    def warm_up(self, challenge: Challenge) -> float:
        """Run the first (slow) product at the challenge's shape, as the validator's warm-up does: seconds."""
        try:
            return float(self._engine.warm_up(challenge.model_dump())["warm_s"])
        except EngineError as exc:
            raise ProverError(str(exc)) from exc

    def open(self, request: OpeningRequest) -> Opening:
        try:
            return Opening.model_validate(self._engine.open(request.model_dump()))
        except EngineError as exc:
            raise ProverError(str(exc)) from exc

    def output(self, gpu: int = 0):
        """The committed C of one GPU (numpy float32), for tests and benchmarks."""
        committed = self._engine._committed
        if committed is None:
            raise ProverError("nothing committed")
        return committed.outputs[gpu]
