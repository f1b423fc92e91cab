"""The dashboard page as one server-rendered HTML document (inline CSS and SVG, no scripts).

Shows the newest round's progress, score and weight history of the leading miners, and one row per
miner (its uid links to its page, ``miner_page``): its latest verdict, its lease state *now* (the
newest sighting, a presence check or a round: ``live.lease_state``, with its age), GPUs and the
figures the validator *proved* (TFLOPS, memory, bandwidth, when: marked stale past
``live.STALE_S``), score, weight and a score sparkline. It fits 1280 px: long reasons wrap in
their cell. Every string from the store is escaped: hotkeys and failure reasons are
miner-influenced text.

Deliberately not here: reading the store, HTTP, or any figure the miner merely claimed.
"""

from __future__ import annotations

import time
from collections import Counter
from html import escape

from compute.dashboard.chrome import aged, miner_link, page
from compute.dashboard.chrome import ago as _when
from compute.dashboard.chrome import fmt as _fmt
from compute.dashboard.live import STALE_S, PresenceView, lease_state
from compute.dashboard.miner_page import lease_html
from compute.dashboard.svg import line_chart, sparkline
from compute.store import MinerOverview, Overview, PogResult, RoundProgress

TOP_SERIES = 8
REFRESH_S = 30


def _gpus(result: PogResult | None) -> str:
    if result is None or not result.models:
        return "—"
    model, _ = Counter(result.models).most_common(1)[0]
    return f"{result.gpu_count}× {model}" if result.gpu_count else model


def _gpus_cell(result: PogResult | None) -> str:
    """The proven GPUs; for a multi-host miner also how many of its hosts were credited (hover: each)."""
    text = escape(_gpus(result))
    if result is None or not result.hosts:
        return f'<td class="l">{text}'
    credited = sum(1 for sample in result.hosts.values() if sample > 0)
    each = "; ".join(
        f"{name}: {sample:.3g}" if sample > 0 else f"{name}: not credited"
        for name, sample in sorted(result.hosts.items())
    )
    hosts = f"{credited} of {len(result.hosts)} hosts"
    return f'<td class="l">{text} <span class="hosts" title="{escape(each)}">· {hosts}</span>'


REASON_SHOWN = 70  # characters of the first reason shown next to the verdict (all of them on hover)


def _verdict(result: PogResult | None) -> str:
    """pass/fail, the round, and the first reason beside it (the miner's own "why")."""
    if result is None:
        return '<span class="none">not tested</span>'
    reasons = "; ".join(result.reasons)
    first = result.reasons[0] if result.reasons else ""
    shown = first if len(first) <= REASON_SHOWN else first[: REASON_SHOWN - 1] + "…"
    why = f' <span class="why" title="{escape(reasons)}">{escape(shown)}</span>' if first else ""
    if result.ok:
        return f'<span class="ok">pass</span> r{result.round_id}{why}'
    return f'<span class="fail" title="{escape(reasons or "failed")}">fail</span> r{result.round_id}{why}'


def _row(miner: MinerOverview, overview: Overview, presence: PresenceView) -> str:
    proven = miner.verified
    now = overview.generated
    state = lease_state(miner.latest, presence.sightings.get(miner.hotkey))
    cells = [
        miner_link(miner.uid),
        f'<td class="l" title="{escape(miner.hotkey)}">{escape(miner.hotkey[:10])}…',
        f'<td class="l wrap">{_verdict(miner.latest)}',
        f'<td class="l lease">{lease_html(state, now)}',
        _gpus_cell(proven),
        f"{_fmt(proven.tflops_fp16 if proven else None)} / {_fmt(proven.tflops_fp32 if proven else None)}",
        f"{_fmt(proven.mem_proven_gb if proven else None)} · {_fmt(proven.mem_gbs if proven else None)}",
        aged(proven.created if proven else None, now, STALE_S),
        _fmt(miner.score),
        _fmt(miner.weight),
        sparkline(overview.score_history.get(miner.uid, ()), width=90),
    ]
    return (
        f'<tr id="uid-{miner.uid}">'
        + "".join(c if c.startswith("<td") else f"<td>{c}" for c in cells)
        + "</tr>"
    )


def _progress(progress: RoundProgress | None, finished: int, now: float) -> str:
    if progress is None:
        return '<div class="card">Round<b>none yet</b></div>'
    share = progress.tested / progress.miners if progress.miners else 0.0
    state = "finished " + aged(progress.finished, now, STALE_S) if progress.finished else "running"
    return (
        f'<div class="card" id="round">Round {progress.round_id} ({state})'
        f"<b>{progress.tested}/{progress.miners} tested, {progress.passed} passed</b>"
        f'<div class="bar"><i style="width:{100 * min(share, 1.0):.0f}%"></i></div>'
        f"block {progress.block}, started {_when(progress.started, now)}</div>"
        f'<div class="card">Rounds finished<b>{finished}</b></div>'
    )


def _top(history, ranking: dict[int, float]) -> dict[str, list[tuple[float, float]]]:
    leaders = sorted(ranking, key=lambda uid: ranking[uid], reverse=True)[:TOP_SERIES]
    return {f"uid {uid}": list(history[uid]) for uid in leaders if uid in history}


def render_page(
    overview: Overview, title: str = "Validator dashboard", presence: PresenceView | None = None
) -> str:
    """The whole HTML page for ``overview`` (``presence``: the newest sightings, for lease states)."""
    now = overview.generated
    presence = presence or PresenceView()
    scores = {m.uid: m.score or 0.0 for m in overview.miners}
    weights = {m.uid: m.weight or 0.0 for m in overview.miners}
    verified = sum(1 for m in overview.miners if m.verified is not None)
    ordered = sorted(overview.miners, key=lambda m: -(m.score or 0.0))
    rows = "".join(_row(m, overview, presence) for m in ordered)
    head = (
        "<tr><th>uid<th class=l>hotkey<th class=l>latest verdict<th class=l>lease now<th class=l>proven GPUs"
        "<th>TFLOPS fp16 / fp32<th>memory GB · GB/s<th>verified"
        "<th>score<th>weight<th>score history</tr>"
    )
    body = (
        f'<div class="cards">{_progress(overview.round, overview.rounds_finished, now)}'
        f'<div class="card">Miners<b id="miner-count">{len(overview.miners)}</b></div>'
        f'<div class="card">Verified machines<b>{verified}</b></div>'
        f'<div class="card">Updated<b>{time.strftime("%H:%M:%S", time.gmtime(now))} UTC</b></div></div>'
        '<div class="charts">'
        f"{line_chart('Score (top miners)', _top(overview.score_history, scores))}"
        f"{line_chart('Weight (top miners)', _top(overview.weight_history, weights))}</div>"
        f'<table id="miners"><thead>{head}</thead><tbody>{rows}</tbody></table>'
        "<p class=none>Figures are what this validator measured on its own clock; nothing here is a "
        "miner's claim. A miner's uid opens its page: why it scored what it did. Lease now: the newest "
        f"sighting (a presence check or a round), stale past {STALE_S / 60:.0f} min.</p>"
    )
    return page(title, "/", body, REFRESH_S)
