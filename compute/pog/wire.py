"""Wire models of a Proof-of-GPU round (pydantic v2, JSON).

validator -> worker: ``Challenge`` then ``OpeningRequest``; worker -> validator: ``Commitment``
then ``Opening``. Arrays travel as ``B64Array``: base64 of raw little-endian bytes with a declared
dtype and shape; the base64 length is checked against the declared shape BEFORE decoding, values
must be finite, extra fields are forbidden, ids are lowercase hex, every list and dimension is
bounded. Never pickle, never eval.

These models only parse and bound; whether an opening proves anything is ``verifier.verify``.
"""

from __future__ import annotations

import base64
import binascii
import math
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

from .engine import MAX_CHUNK, MAX_DIM, MAX_GPUS, MAX_N, MAX_OPEN_COLS, MAX_OPEN_ROWS, MAX_OUTPUT_ELEMENTS

Precision = Literal["fp16", "bf16", "fp32"]
Hex32 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{32}$")]
Hex64 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
MAX_PATH = 64
MAX_ARRAY_ELEMENTS = MAX_DIM
MAX_MESSAGE_BYTES = 64 * 1024 * 1024


class WireError(ValueError):
    """A message that cannot be accepted (too large, malformed JSON, wrong shape)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class B64Array(_Model):
    """A 1-D or 2-D little-endian array as base64 (``<f4`` only: every PoG array is fp32)."""

    dtype: Literal["<f4"]
    shape: list[Annotated[int, Field(ge=0, le=MAX_ARRAY_ELEMENTS)]] = Field(min_length=1, max_length=2)
    data: str

    @model_validator(mode="after")
    def _check_payload(self) -> B64Array:
        count = math.prod(self.shape)
        if count > MAX_ARRAY_ELEMENTS:
            raise ValueError(f"array of {count} elements exceeds the limit of {MAX_ARRAY_ELEMENTS}")
        expected = 4 * ((count * 4 + 2) // 3)
        if len(self.data) != expected:
            raise ValueError(
                f"base64 payload has {len(self.data)} characters, shape {self.shape} needs {expected}"
            )
        try:
            raw = base64.b64decode(self.data, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError(f"invalid base64 payload: {exc}") from None
        if not np.isfinite(np.frombuffer(raw, dtype="<f4")).all():
            raise ValueError("array contains NaN or infinity")
        return self

    def to_numpy(self) -> np.ndarray:
        return np.frombuffer(base64.b64decode(self.data), dtype="<f4").reshape(self.shape)

    @classmethod
    def from_numpy(cls, array: np.ndarray) -> B64Array:
        data = np.ascontiguousarray(array, dtype="<f4")
        return cls(dtype="<f4", shape=list(data.shape), data=base64.b64encode(data.tobytes()).decode("ascii"))


class Challenge(_Model):  # validator -> worker
    """A fresh secret challenge; per-GPU keys are derived with ``generator.subkey(key, gpu)``."""

    kind: Literal["pog.challenge"] = "pog.challenge"
    # the input generator's version (generator.GEN_VERSION "compute-pog-gen/2"): a worker that
    # generates version-1 inputs rejects this challenge by name instead of failing its entries
    version: Literal[2] = 2
    challenge_id: Hex32
    key: Hex32
    precision: Precision
    m: int = Field(ge=1, le=MAX_DIM)
    n: int = Field(ge=1, le=MAX_N)
    p: int = Field(ge=1, le=MAX_DIM)
    gpu_count: int = Field(ge=1, le=MAX_GPUS)
    chunk: int = Field(ge=1, le=MAX_CHUNK)

    @model_validator(mode="after")
    def _bounded_output(self) -> Challenge:
        if self.m * self.p > MAX_OUTPUT_ELEMENTS:
            raise ValueError(f"m*p must be at most {MAX_OUTPUT_ELEMENTS}")
        return self


class GpuTimings(_Model):
    compute_s: float = Field(ge=0, allow_inf_nan=False)
    hash_s: float = Field(ge=0, allow_inf_nan=False)


class Timings(_Model):
    """Advisory phase timings reported by the prover; the validator trusts only its own clock."""

    total_s: float = Field(ge=0, allow_inf_nan=False)
    per_gpu: list[GpuTimings] = Field(default_factory=list, max_length=MAX_GPUS)


class Commitment(_Model):  # worker -> validator
    kind: Literal["pog.commitment"] = "pog.commitment"
    challenge_id: Hex32
    roots: list[Hex64] = Field(min_length=1, max_length=MAX_GPUS)
    timings: Timings | None = None


class OpeningRequest(_Model):  # validator -> worker
    """Rows to open per GPU and, per opened row, its own independently drawn columns to check."""

    kind: Literal["pog.open"] = "pog.open"
    challenge_id: Hex32
    rows: list[list[Annotated[int, Field(ge=0, lt=MAX_DIM)]]] = Field(min_length=1, max_length=MAX_GPUS)
    cols: list[list[list[Annotated[int, Field(ge=0, lt=MAX_DIM)]]]] = Field(min_length=1, max_length=MAX_GPUS)

    @field_validator("rows")
    @classmethod
    def _bounded_rows(cls, value: list[list[int]]) -> list[list[int]]:
        for indices in value:
            _check_indices(indices, MAX_OPEN_ROWS)
        return value

    @field_validator("cols")
    @classmethod
    def _bounded_cols(cls, value: list[list[list[int]]]) -> list[list[list[int]]]:
        for per_gpu in value:
            if not 1 <= len(per_gpu) <= MAX_OPEN_ROWS:
                raise ValueError(f"each GPU needs column lists for 1..{MAX_OPEN_ROWS} rows")
            for indices in per_gpu:
                _check_indices(indices, MAX_OPEN_COLS)
        return value

    @model_validator(mode="after")
    def _one_column_list_per_row(self) -> OpeningRequest:
        if [len(r) for r in self.rows] != [len(c) for c in self.cols]:
            raise ValueError("cols must hold one column list per opened row")
        return self


def _check_indices(indices: list[int], limit: int) -> None:
    if not 1 <= len(indices) <= limit:
        raise ValueError(f"each list needs 1..{limit} indices")
    if len(set(indices)) != len(indices):
        raise ValueError("indices must be distinct")


class RowProof(_Model):
    index: int = Field(ge=0, lt=MAX_DIM)
    row: B64Array
    path: list[Hex64] = Field(max_length=MAX_PATH)


class GpuOpening(_Model):
    rows: list[RowProof] = Field(min_length=1, max_length=MAX_OPEN_ROWS)


class Opening(_Model):  # worker -> validator
    kind: Literal["pog.opening"] = "pog.opening"
    challenge_id: Hex32
    per_gpu: list[GpuOpening] = Field(min_length=1, max_length=MAX_GPUS)


def parse_message(model: type[_Model], raw: str | bytes, max_bytes: int = MAX_MESSAGE_BYTES) -> _Model:
    """Parse one JSON message, refusing anything larger than ``max_bytes`` before parsing; any
    parser failure (deep nesting, huge numbers, wrong types, truncation) is a ``WireError``."""
    if len(raw) > max_bytes:
        raise WireError(f"message of {len(raw)} bytes exceeds the limit of {max_bytes}")
    try:
        return model.model_validate_json(raw)
    except (ValueError, TypeError, RecursionError, OverflowError, MemoryError) as exc:
        reason = str(exc)[:500] if isinstance(exc, ValueError) else type(exc).__name__
        raise WireError(f"invalid {model.__name__} (malformed): {reason}") from None
