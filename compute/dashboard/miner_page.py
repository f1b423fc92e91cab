"""One miner's page (``/miner/{uid}``): why it scored what it did, what it does now, its recent rounds.

Built from ``live.MinerDetail`` through the public view only: every result passes
``views.public_result`` (its listed fields, reasons scrubbed) before anything reads it, so the
page shows what the overview may show plus the sample's terms (``compute.scoring.explain``: per-GPU
value and the model credited, host and sustained factors, rented bonus, availability and rental
uptime, the EMA step, the presence share, the reason for a zero), none of which names a device, a
canary, a lockstep group or a timing. The collateral factor is the validator's to apply when it
sets weights; this page does not read it and says so.

Deliberately not here: reading the store, HTTP.
"""

from __future__ import annotations

from collections import Counter
from html import escape

from compute.dashboard.chrome import aged, ago, page
from compute.dashboard.chrome import fmt as _fmt
from compute.dashboard.live import STALE_S, LeaseState, MinerDetail, ScoreStep, lease_state
from compute.dashboard.views import public_result
from compute.scoring import Explanation, GpuTable, HolisticConfig, ScoringConfig, explain
from compute.store import PogResult

REFRESH_S = 30
COLLATERAL_NOTE = "applied when weights are set (the validator's scoreboard shows it); not read by this page"


def _alpha(step: ScoreStep | None, result: PogResult, default: float) -> float:
    """The moving average's alpha as the stored step shows it (the dashboard does not know the
    validator's setting); ``default`` when the step cannot show it."""
    if step is None or step.previous is None or result.history_reset:
        return default
    spread = result.sample - step.previous
    if abs(spread) < 1e-12:
        return default
    alpha = (step.score - step.previous) / spread
    return alpha if 0.0 < alpha <= 1.0 else default


def explain_latest(
    detail: MinerDetail,
    table: GpuTable | None = None,
    holistic: HolisticConfig | None = None,
    scoring: ScoringConfig | None = None,
) -> Explanation | None:
    """The explanation of the miner's newest result, through the public view (None: never tested)."""
    if not detail.results:
        return None
    result = public_result(detail.results[0])
    assert result is not None
    scoring = scoring or ScoringConfig()
    step = detail.steps.get(result.round_id)
    scoring = scoring.model_copy(update={"ema_alpha": _alpha(step, result, scoring.ema_alpha)})
    shares = detail.presence.shares
    return explain(
        result,
        table=table,
        holistic=holistic,
        scoring=scoring,
        previous_score=step.previous if step is not None else None,
        new_score=step.score if step is not None else None,
        with_ema=step is not None,
        presence_share=None if shares is None else shares.get(detail.hotkey, 0.0),
    )


def lease_html(state: LeaseState, now: float) -> str:
    css = "rented" if "rented" in state.label else ("fail" if state.label in ("absent", "failed") else "")
    label = escape(state.label + (f" ({state.detail})" if state.detail else ""))
    seen = (
        f" <span class=why>{escape(state.source)}, {aged(state.at, now, STALE_S)}</span>" if state.at else ""
    )
    return f'<span class="{css}">{label}</span>{seen}'


def _terms(explanation: Explanation | None) -> str:
    if explanation is None:
        return '<p class="none">Not tested yet: no sample to explain.</p>'
    rows = "".join(f"<tr><td>{escape(label)}<td>{escape(value)}</tr>" for label, value in explanation.terms())
    if explanation.collateral_factor is None:
        rows += f'<tr><td>collateral factor<td class="none">{COLLATERAL_NOTE}</tr>'
    if explanation.ema is None:
        rows += '<tr><td>EMA step<td class="none">round still open: the score moves when it closes</tr>'
    return (
        f'<table class="terms" id="terms">{rows}</table>'
        f'<code class="line" id="explained">{escape(explanation.line())}</code>'
    )


def _verdict(result: PogResult) -> str:
    if result.rented and result.ok:
        return '<span class="rented">rented</span>'
    return '<span class="ok">pass</span>' if result.ok else '<span class="fail">fail</span>'


def _rounds(detail: MinerDetail, now: float) -> str:
    rows = []
    for raw in detail.results:
        result = public_result(raw)
        assert result is not None
        step = detail.steps.get(result.round_id)
        why = result.reasons[0] if result.reasons else ""
        rows.append(
            f"<tr><td>{result.round_id}<td>{ago(result.created, now)}<td class=l>{_verdict(result)}"
            f"<td>{_fmt(result.sample, 4)}<td>{_fmt(step.score if step else None, 4)}"
            f'<td class="l wrap why">{escape(why)}</tr>'
        )
    head = "<tr><th>round<th>when<th class=l>verdict<th>sample<th>score after<th class=l>first reason</tr>"
    return f'<table id="rounds"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'


def _proven(detail: MinerDetail) -> PogResult | None:
    return next((public_result(r) for r in detail.results if r.ok and not r.rented), None)


def render_miner_page(
    detail: MinerDetail, explanation: Explanation | None, title: str = "Validator dashboard"
) -> str:
    """The whole HTML page of one miner."""
    now = detail.generated
    latest = public_result(detail.results[0]) if detail.results else None
    state = lease_state(latest, detail.presence.sightings.get(detail.hotkey))
    proven = _proven(detail)
    gpus = "—"
    if proven is not None and proven.models:
        model = Counter(proven.models).most_common(1)[0][0]
        gpus = f"{proven.gpu_count}× {model}" if proven.gpu_count else model  # a CPU machine: no count
    share = (detail.presence.shares or {}).get(detail.hotkey) if detail.presence.shares is not None else None
    cards = (
        f'<div class="cards"><div class="card">Score<b>{_fmt(detail.score, 4)}</b></div>'
        f'<div class="card">Weight<b>{_fmt(detail.weight, 4)}</b></div>'
        f'<div class="card" id="lease">Lease state now<b>{lease_html(state, now)}</b></div>'
        f'<div class="card">Presence share<b>{_fmt(share)}</b></div>'
        f'<div class="card">Proven GPUs<b>{escape(gpus)}</b>'
        f"{aged(proven.created if proven else None, now, STALE_S)}</div></div>"
    )
    figures = (
        f"TFLOPS fp16 {_fmt(proven.tflops_fp16)} · fp32 {_fmt(proven.tflops_fp32)} · memory "
        f"{_fmt(proven.mem_proven_gb)} GB · {_fmt(proven.mem_gbs)} GB/s"
        if proven is not None
        else "nothing proven yet"
    )
    round_id = f" (round {latest.round_id}, {ago(latest.created, now)})" if latest is not None else ""
    since = ""
    step = detail.steps.get(latest.round_id) if latest is not None else None
    if (
        latest is not None
        and step is not None
        and detail.score is not None
        and abs(detail.score - step.score) > 1e-9
    ):
        since = (
            f'<p class="stale" id="since">Not tested since round {latest.round_id}: the score has '
            f"moved from {_fmt(step.score, 4)} to {_fmt(detail.score, 4)} since (each round it is not "
            "tested multiplies it by the missed-round decay).</p>"
        )
    body = (
        f'<p>Hotkey <code title="{escape(detail.hotkey)}">{escape(detail.hotkey)}</code> · '
        f'<a href="/machines#uid-{detail.uid}">on the machines page</a> · '
        f'<a href="/">back to the overview</a></p>{cards}'
        f"<p class=why>Proven figures: {figures}</p>"
        f"<h2>Why this score{round_id}</h2>{_terms(explanation)}{since}"
        f"<h2>Recent rounds</h2>{_rounds(detail, now)}"
        "<p class=none>Figures are what this validator measured on its own clock; nothing here is a "
        "miner's claim. The sample's terms multiply back to the sample the validator stored.</p>"
    )
    return page(f"{title}: miner uid {detail.uid}", f"/miner/{detail.uid}", body, REFRESH_S)


__all__ = ["COLLATERAL_NOTE", "explain_latest", "lease_html", "render_miner_page"]
