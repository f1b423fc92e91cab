"""Interconnect proof: a timed all-reduce over keyed shards, judged on the validator's clock.

``new_challenge(endpoints, bytes, deadline)`` -> ``InterconnectSession(channels).setup(...)`` ->
``session.prove(challenge)`` -> ``InterconnectVerdict`` (passed, interval, bandwidth per link,
failures by name). Each participant (``participant.serve``, torch: gloo on CPU, NCCL on CUDA)
all-reduces its own keyed shard, commits a Merkle root and opens chunks; the validator's side
(``judge``, ``session``, ``shards``) is numpy only. What it proves and what it cannot:
docs/cluster.md. Scoring a proven link and cluster rentals are not here.
"""

from __future__ import annotations

from .judge import (
    Arrival,
    InterconnectChallenge,
    InterconnectError,
    InterconnectVerdict,
    choose_openings,
    commit_tree,
    judge,
    new_challenge,
)
from .local import local_participants
from .session import Channel, InterconnectSession, PipeChannel, PlainResult
from .shards import participant_key, reduced_rows, shard_rows
from .wire import WireError

__all__ = [
    "Arrival",
    "Channel",
    "InterconnectChallenge",
    "InterconnectError",
    "InterconnectSession",
    "InterconnectVerdict",
    "PipeChannel",
    "PlainResult",
    "WireError",
    "choose_openings",
    "commit_tree",
    "judge",
    "local_participants",
    "new_challenge",
    "participant_key",
    "reduced_rows",
    "shard_rows",
]
