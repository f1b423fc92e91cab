"""The dashboard page as one server-rendered HTML document (inline CSS and SVG, no scripts).

Shows the newest round's progress, score and weight history of the leading miners, and one row per
miner: its latest verdict, rental status, GPUs and the figures the validator *proved* (TFLOPS,
memory, bandwidth, when), score, weight and a score sparkline. Every string from the store is
escaped: hotkeys and failure reasons are miner-influenced text.

Deliberately not here: reading the store, HTTP, or any figure the miner merely claimed.
"""

from __future__ import annotations

import time
from collections import Counter
from html import escape

from compute.dashboard.svg import line_chart, sparkline
from compute.store import MinerOverview, Overview, PogResult, RoundProgress

TOP_SERIES = 8
REFRESH_S = 30

_CSS = """
body{font:13px system-ui,sans-serif;margin:16px;color:#0f172a}
h1{font-size:18px;margin:0 0 8px}
.cards{display:flex;gap:16px;flex-wrap:wrap;margin-bottom:12px}
.card{border:1px solid #cbd5e1;border-radius:6px;padding:8px 12px;min-width:140px}
.card b{display:block;font-size:16px}
.bar{background:#e2e8f0;height:8px;border-radius:4px;margin-top:4px}
.bar i{display:block;height:8px;border-radius:4px;background:#2563eb}
.charts{display:flex;gap:16px;flex-wrap:wrap}
figure{margin:0}figcaption{font-weight:600}
.legend{display:flex;gap:8px;flex-wrap:wrap;font-size:11px}
.key i{display:inline-block;width:10px;height:10px;margin-right:3px}
table{border-collapse:collapse;margin-top:12px}
th,td{border-bottom:1px solid #e2e8f0;padding:3px 6px;text-align:right;white-space:nowrap}
th{background:#f1f5f9}td.l,th.l{text-align:left}
.ok{color:#16a34a}.fail{color:#dc2626}.none{color:#64748b}.why{color:#475569;font-size:.85em}
"""


def _fmt(value: float | None, digits: int = 3) -> str:
    """Significant digits, so a CPU demo's 0.004 TFLOPS and an H100's 742 both read right."""
    return "—" if value is None else f"{value:.{digits}g}"


def _when(ts: float | None, now: float) -> str:
    if not ts:
        return "—"
    age = max(0.0, now - ts)
    if age < 120:
        return f"{age:.0f}s ago"
    if age < 7200:
        return f"{age / 60:.0f}m ago"
    if age < 172_800:
        return f"{age / 3600:.0f}h ago"
    return time.strftime("%Y-%m-%d", time.gmtime(ts))


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


REASON_SHOWN = 90  # characters of the first reason shown next to the verdict (all of them on hover)


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


def _rental(result: PogResult | None) -> str:
    if result is None:
        return "—"
    return "rented" if result.rented else "available"


def _row(miner: MinerOverview, overview: Overview) -> str:
    proven = miner.verified
    cells = [
        str(miner.uid),
        f'<td class="l" title="{escape(miner.hotkey)}">{escape(miner.hotkey[:12])}…',
        f'<td class="l">{_verdict(miner.latest)}',
        f'<td class="l">{_rental(miner.latest)}',
        _gpus_cell(proven),
        _fmt(proven.tflops_fp16 if proven else None),
        _fmt(proven.tflops_fp32 if proven else None),
        _fmt(proven.mem_proven_gb if proven else None),
        _fmt(proven.mem_gbs if proven else None),
        _when(proven.created if proven else None, overview.generated),
        _fmt(miner.score),
        _fmt(miner.weight),
        sparkline(overview.score_history.get(miner.uid, ())),
    ]
    return "<tr>" + "".join(c if c.startswith("<td") else f"<td>{c}" for c in cells) + "</tr>"


def _progress(progress: RoundProgress | None, finished: int, now: float) -> str:
    if progress is None:
        return '<div class="card">Round<b>none yet</b></div>'
    share = progress.tested / progress.miners if progress.miners else 0.0
    state = "finished " + _when(progress.finished, now) if progress.finished else "running"
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


def render_page(overview: Overview, title: str = "Validator dashboard") -> str:
    """The whole HTML page for ``overview``."""
    now = overview.generated
    scores = {m.uid: m.score or 0.0 for m in overview.miners}
    weights = {m.uid: m.weight or 0.0 for m in overview.miners}
    verified = sum(1 for m in overview.miners if m.verified is not None)
    rows = "".join(_row(m, overview) for m in sorted(overview.miners, key=lambda m: -(m.score or 0.0)))
    head = (
        "<tr><th>uid<th class=l>hotkey<th class=l>verdict<th class=l>rental<th class=l>proven GPUs"
        "<th>TFLOPS fp16<th>TFLOPS fp32<th>memory GB<th>bandwidth GB/s<th>verified"
        "<th>score<th>weight<th>score history</tr>"
    )
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f'<meta http-equiv="refresh" content="{REFRESH_S}"><style>{_CSS}</style></head><body>'
        f"<h1>{escape(title)}</h1>"
        f'<div class="cards">{_progress(overview.round, overview.rounds_finished, now)}'
        f'<div class="card">Miners<b id="miner-count">{len(overview.miners)}</b></div>'
        f'<div class="card">Verified machines<b>{verified}</b></div>'
        f'<div class="card">Updated<b>{time.strftime("%H:%M:%S", time.gmtime(now))} UTC</b></div></div>'
        '<div class="charts">'
        f"{line_chart('Score (top miners)', _top(overview.score_history, scores))}"
        f"{line_chart('Weight (top miners)', _top(overview.weight_history, weights))}</div>"
        f'<table id="miners"><thead>{head}</thead><tbody>{rows}</tbody></table>'
        "<p class=none>Figures are what this validator measured on its own clock; nothing here is a "
        "miner's claim.</p></body></html>"
    )
