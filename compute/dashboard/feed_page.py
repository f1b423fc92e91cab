"""The public machine feed as a page (``/machines``): one server-rendered HTML document, no scripts.

One row per machine: uid, hotkey, the GPUs and figures this validator proved, when first and last
proven, uptime over 7 and 30 days, a 30-day strip (one square per day, shaded by the share of
tests passed; grey: not tested) and the last verdicts (green verified, blue rented, red failed);
then whether it was free or rented when this validator last looked, with that look's age, and the
price the miner signed in its latest availability answer (what the miner says; no score reads it),
with its collateral deposit and any pending reclaim.
A uid links to the miner's page; a last proof older than ``live.STALE_S`` is marked stale with its
age. Built from the same ``MachineFeed`` the JSON view serves, so the page can never show more.
"""

from __future__ import annotations

import time
from html import escape

from compute.dashboard.chrome import aged, ago, miner_link, page
from compute.dashboard.chrome import fmt as _fmt
from compute.dashboard.feed import FeedMachine, FeedPrice, FeedWindow, MachineFeed
from compute.dashboard.live import STALE_S

REFRESH_S = 60
_COLORS = {"verified": "#16a34a", "rented": "#2563eb", "failed": "#dc2626"}


def _date(ts: float | None) -> str:
    return "—" if not ts else time.strftime("%Y-%m-%d %H:%M", time.gmtime(ts))


def _uptime(window: FeedWindow | None) -> str:
    if window is None or window.uptime is None:
        return '<span class="none">—</span>'
    title = f"{window.passed} of {window.tests} tests passed ({window.rented} while rented)"
    return f'<span title="{escape(title)}">{100 * window.uptime:.0f}%</span>'


def _strip(daily: list[list[int]]) -> str:
    """One 5-px bar per day, the oldest on the left, green in proportion to tests passed."""
    width = 4 * len(daily)
    cells = []
    for index, (tests, passed) in enumerate(daily):
        share = passed / tests if tests else None
        fill = (
            "#e2e8f0"
            if share is None
            else f"rgb({int(220 * (1 - share))},{int(60 + 103 * share)},{int(38 + 36 * share)})"
        )
        label = "not tested" if tests == 0 else f"{passed}/{tests} passed"
        cells.append(
            f'<rect x="{4 * index}" y="0" width="3" height="12" fill="{fill}"><title>{label}</title></rect>'
        )
    return f'<svg class="days" width="{width}" height="12" viewBox="0 0 {width} 12">{"".join(cells)}</svg>'


def _recent(machine: FeedMachine) -> str:
    dots = "".join(
        f'<circle cx="{4 + 6 * i}" cy="6" r="2.5" fill="{_COLORS[v.verdict]}"><title>{v.verdict} {_date(v.at)}</title></circle>'
        for i, v in enumerate(machine.recent)
    )
    width = 6 * max(1, len(machine.recent)) + 2
    return f'<svg class="recent" width="{width}" height="12" viewBox="0 0 {width} 12">{dots}</svg>'


def _gpus(machine: FeedMachine) -> str:
    if not machine.gpu_model:
        return '<span class="none">not proven</span>'
    text = escape(f"{machine.gpu_count}× {machine.gpu_model}" if machine.gpu_count else machine.gpu_model)
    if machine.hosts_credited is not None:
        text += f" · {machine.hosts_credited} host(s)"
    return text


_NOW_CLASS = {"free": "ok", "partly rented": "rented", "rented": "rented"}


def _now(machine: FeedMachine, now: float) -> str:
    seen = machine.now
    if seen is None:
        return '<span class="none">not seen</span>'
    how = "its test" if seen.source == "test" else "the miner's availability answer"
    free = f" · {seen.free_gpus} free" if seen.free_gpus is not None and seen.state != "free" else ""
    return (
        f'<span class="{_NOW_CLASS[seen.state]}" title="{escape(how)}">{seen.state}</span>'
        f"{free}<br>{aged(seen.seen_at, now, STALE_S)}"
    )


def _price_text(price: FeedPrice, gpu_count: int) -> str:
    """The dearest GPU price it names (or its per-lease price), then what all its GPUs cost."""
    dearest = max(price.gpu_hour.values(), default=None)
    text = f"${dearest:.4g}/GPU·h" if dearest is not None else f"${price.base_hour:.4g}/h"
    hourly = price.hourly(gpu_count) if gpu_count and dearest is not None else None
    if hourly is not None and (gpu_count > 1 or price.base_hour):
        text += f"<br>all {gpu_count}: ${hourly:.4g}/h"
    return text


def _price(machine: FeedMachine, now: float) -> str:
    price, deposit = machine.price, machine.collateral
    cell = (
        '<span class="none">no price</span>'
        if price is None
        else f'<span title="signed by the miner {escape(ago(price.seen_at, now))}; '
        f'not checked, not scored">{_price_text(price, machine.gpu_count)}</span>'
    )
    if deposit is not None:
        pending = (
            f", {deposit.pending_reclaim_tao:.4g} reclaim pending" if deposit.pending_reclaim_tao else ""
        )
        cell += f'<br><span class="deposit">deposit {deposit.standing_tao:.4g} τ{pending}</span>'
    return cell


def _row(machine: FeedMachine, now: float) -> str:
    cells = [
        f"<td>{miner_link(machine.uid)}",
        f'<td class="l hotkey" title="{escape(machine.hotkey)}">{escape(machine.hotkey[:12])}…',
        f'<td class="l gpus">{_gpus(machine)}',
        f"<td>{_fmt(machine.tflops_fp16)} / {_fmt(machine.tflops_fp32)}",
        f"<td>{_fmt(machine.memory_gb)} · {_fmt(machine.bandwidth_gbs)}",
        f"<td>{_date(machine.first_proven_at)[:10]}",
        f"<td>{aged(machine.last_proven_at, now, STALE_S)}",
        f"<td>{_uptime(machine.window(7))} / {_uptime(machine.window(30))}",
        f'<td class="l">{_strip(machine.daily)}',
        f'<td class="l">{_recent(machine)}',
        f'<td class="l now">{_now(machine, now)}<br>{_price(machine, now)}',
    ]
    return f'<tr data-uid="{machine.uid}" id="uid-{machine.uid}">' + "".join(cells) + "</tr>"


def _order(machine: FeedMachine) -> tuple:
    month = machine.window(30)
    return (machine.gpu_model is None, -(month.uptime or 0.0) if month else 0.0, machine.uid)


def render_feed_page(feed: MachineFeed, title: str = "Machines proven by this validator") -> str:
    head = (
        "<tr><th>uid<th class=l>hotkey<th class=l>proven GPUs<th>TFLOPS fp16 / fp32"
        "<th>memory GB · GB/s<th>first proven<th>last proven<th>uptime 7 d / 30 d"
        "<th class=l>30 days<th class=l>last verdicts<th class=l>now · price</tr>"
    )
    rows = "".join(_row(m, feed.generated_at) for m in sorted(feed.machines, key=_order))
    signer = (
        f" Signed JSON: <code>/api/public/v1/machines</code>, validator hotkey {escape(feed.validator)}."
        if feed.validator
        else ""
    )
    body = (
        f"<p class=why>Every figure is what this validator measured on its own clock; uptime is the share "
        f"of its tests (at moments the miners could not choose) that found the machine present and "
        f"proven. Prices are what each miner signed; they never enter a score. Updated "
        f"{_date(feed.generated_at)} UTC.{signer}</p>"
        f'<table id="machines"><thead>{head}</thead><tbody>{rows}</tbody></table>'
    )
    return page(title, "/machines", body, REFRESH_S)


__all__ = ["render_feed_page"]
