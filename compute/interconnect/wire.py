"""Wire messages of an interconnect proof: JSON lines between the validator and each participant.

validator -> participant: ``Setup`` (join the process group, untimed), ``Reveal`` (the clock starts as it is sent), ``OpenRequest``, ``Plain``
(benchmarks: a plain all-reduce of the same size, for comparison). participant -> validator:
``Ready`` (process group up, untimed), ``Commit`` (the clock stops at the last one), ``Opening``,
``PlainDone``. Chunks travel as base64 of raw little-endian int32, length checked before decoding.
Extra fields are forbidden, ids are lowercase hex, every list is bounded. Never pickle, never eval.

These models only parse and bound; whether a commitment proves anything is ``judge.judge``.
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Literal

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    model_validator,
)

Hex32 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{32}$")]
Hex64 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
MAX_WORLD = 1024
MAX_CHUNK_LEN = 1 << 20  # words in one chunk (a Merkle leaf)
MAX_CHUNKS = 1 << 24
MAX_OPEN = 64  # chunks opened per participant
MAX_PATH = 64
MAX_LINE_BYTES = 64 * 1024 * 1024


class WireError(ValueError):
    """A line that cannot be accepted (too long, malformed JSON, a field out of bounds)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Int32Chunk(_Model):
    """One chunk of the reduced vector: base64 of ``length`` little-endian int32 words."""

    length: int = Field(ge=1, le=MAX_CHUNK_LEN)
    data: str

    @model_validator(mode="after")
    def _check_payload(self) -> Int32Chunk:
        expected = 4 * ((self.length * 4 + 2) // 3)
        if len(self.data) != expected:
            raise ValueError(
                f"base64 payload has {len(self.data)} characters, {self.length} words need {expected}"
            )
        try:
            base64.b64decode(self.data, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError(f"invalid base64 payload: {exc}") from None
        return self

    def to_numpy(self) -> np.ndarray:
        return np.frombuffer(base64.b64decode(self.data), dtype="<i4")

    @classmethod
    def from_numpy(cls, row: np.ndarray) -> Int32Chunk:
        data = np.ascontiguousarray(row, dtype="<i4")
        return cls(length=len(data), data=base64.b64encode(data.tobytes()).decode("ascii"))


class Setup(_Model):  # validator -> participant, first line: join the process group (untimed)
    kind: Literal["interconnect.setup"] = "interconnect.setup"
    rank: int = Field(ge=0, lt=MAX_WORLD)
    world: int = Field(ge=2, le=MAX_WORLD)
    init_method: Annotated[str, StringConstraints(pattern=r"^tcp://[0-9A-Za-z.\-\[\]:]{1,200}:[0-9]{1,5}$")]
    device: Literal["auto", "cpu", "cuda"] = "auto"
    threads: int = Field(default=2, ge=1, le=256)  # hashing threads
    segment_chunks: int = Field(default=256, ge=1, le=MAX_CHUNKS)  # chunks per pipelined all-reduce


class Ready(_Model):  # participant -> validator
    kind: Literal["interconnect.ready"] = "interconnect.ready"
    rank: int = Field(ge=0, lt=MAX_WORLD)
    device: Literal["cpu", "cuda"]


class Reveal(_Model):  # validator -> participant: the clock starts as the first one is sent
    kind: Literal["interconnect.reveal"] = "interconnect.reveal"
    challenge_id: Hex32
    key: Hex32  # this participant's shard key, revealed to it alone
    rank: int = Field(ge=0, lt=MAX_WORLD)
    world: int = Field(ge=2, le=MAX_WORLD)
    chunks: int = Field(ge=1, le=MAX_CHUNKS)
    chunk_len: int = Field(ge=1, le=MAX_CHUNK_LEN)


class PhaseTimes(_Model):
    """The participant's own account of its phases: advisory (benchmarks), never in a verdict."""

    generate_s: float = Field(ge=0)
    reduce_s: float = Field(ge=0)
    hash_s: float = Field(ge=0)
    total_s: float = Field(ge=0)


class Commit(_Model):  # participant -> validator: the clock stops at the last one
    kind: Literal["interconnect.commit"] = "interconnect.commit"
    challenge_id: Hex32
    rank: int = Field(ge=0, lt=MAX_WORLD)
    root: Hex64
    phases: PhaseTimes | None = None


class OpenRequest(_Model):  # validator -> participant, after the clock stopped
    kind: Literal["interconnect.open"] = "interconnect.open"
    challenge_id: Hex32
    chunks: list[Annotated[int, Field(ge=0, lt=MAX_CHUNKS)]] = Field(min_length=1, max_length=MAX_OPEN)


class ChunkProof(_Model):
    index: int = Field(ge=0, lt=MAX_CHUNKS)
    chunk: Int32Chunk
    path: list[Hex64] = Field(max_length=MAX_PATH)


class Opening(_Model):  # participant -> validator
    kind: Literal["interconnect.opening"] = "interconnect.opening"
    challenge_id: Hex32
    rank: int = Field(ge=0, lt=MAX_WORLD)
    chunks: list[ChunkProof] = Field(max_length=MAX_OPEN)


class Plain(_Model):  # validator -> participant (benchmarks): a plain all-reduce of as many words
    kind: Literal["interconnect.plain"] = "interconnect.plain"
    words: int = Field(ge=1, le=MAX_CHUNKS)


class PlainDone(_Model):  # participant -> validator
    kind: Literal["interconnect.plain_done"] = "interconnect.plain_done"
    rank: int = Field(ge=0, lt=MAX_WORLD)
    reduce_s: float = Field(ge=0)  # its own timing of the all-reduce alone (advisory)


ToParticipant = Annotated[Setup | Reveal | OpenRequest | Plain, Field(discriminator="kind")]
ToValidator = Annotated[Ready | Commit | Opening | PlainDone, Field(discriminator="kind")]
_TO_PARTICIPANT: TypeAdapter = TypeAdapter(ToParticipant)
_TO_VALIDATOR: TypeAdapter = TypeAdapter(ToValidator)


def _parse(adapter: TypeAdapter, line: str | bytes):  # noqa: ANN202 - one of the union's models
    if len(line) > MAX_LINE_BYTES:
        raise WireError(f"line of {len(line)} bytes exceeds {MAX_LINE_BYTES}")
    try:
        return adapter.validate_json(line)
    except ValidationError as exc:
        raise WireError(f"bad message: {exc.errors()[0].get('msg', exc)}") from None


def parse_to_participant(line: str | bytes) -> Setup | Reveal | OpenRequest | Plain:
    return _parse(_TO_PARTICIPANT, line)


def parse_to_validator(line: str | bytes) -> Ready | Commit | Opening | PlainDone:
    return _parse(_TO_VALIDATOR, line)


def encode(message: _Model) -> str:
    """One JSON line (with its newline)."""
    return message.model_dump_json() + "\n"
