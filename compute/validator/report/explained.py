"""Every tested miner's sample explained, once per round, for the scoreboard and the verdicts.

``explain_round`` calls ``compute.scoring.explain`` on each result with what the round loop knows
when it reports: the score before and after the round, each hotkey's presence share and each uid's
credit factor (collateral). The scoreboard prints each explanation's line under the round table;
the verdict a miner receives carries the same line (``verdicts.verdict_of``).

Deliberately not here: any score (the round loop has applied them already), printing, the wire.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from compute.scoring import Explanation, GpuTable, HolisticConfig, ScoringConfig, explain
from compute.store import PogResult, ScoreRecord


def explain_round(
    results: Iterable[PogResult],
    before: Mapping[int, ScoreRecord],
    after: Mapping[int, ScoreRecord],
    *,
    table: GpuTable | None,
    holistic: HolisticConfig | None,
    scoring: ScoringConfig,
    shares: Mapping[str, float] | None = None,
    factors: Mapping[int, float] | None = None,
) -> dict[int, Explanation]:
    """uid -> the explanation of its result this round (the EMA step from ``before`` to ``after``)."""
    out: dict[int, Explanation] = {}
    for result in results:
        prev, new = before.get(result.uid), after.get(result.uid)
        out[result.uid] = explain(
            result,
            table=table,
            holistic=holistic,
            scoring=scoring,
            previous_score=prev.score if prev is not None and prev.hotkey == result.hotkey else None,
            new_score=new.score if new is not None and new.hotkey == result.hotkey else None,
            presence_share=None if shares is None else shares.get(result.hotkey, 0.0),
            collateral_factor=None if factors is None else factors.get(result.uid, 1.0),
        )
    return out


__all__ = ["explain_round"]
