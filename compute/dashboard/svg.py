"""Tiny server-side SVG charts: a sparkline and a multi-series line chart with a legend.

Server-rendered so the page needs no JavaScript and no charting library (nothing to vendor, nothing
fetched at run time) and a browser paints it at once. Pure string building; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563")
Series = Sequence[tuple[float, float]]


def _scale(
    series: Series, width: float, height: float, x_range: tuple[float, float], y_max: float, pad: float
) -> str:
    x0, x1 = x_range
    span = (x1 - x0) or 1.0
    top = y_max or 1.0
    points = (
        f"{pad + (x - x0) / span * (width - 2 * pad):.1f},{height - pad - y / top * (height - 2 * pad):.1f}"
        for x, y in series
    )
    return " ".join(points)


def sparkline(series: Series, width: int = 120, height: int = 24, color: str = PALETTE[0]) -> str:
    """An inline SVG polyline of ``series`` ((x, y) pairs), or an empty box when it has < 2 points."""
    box = f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} {height}">'
    if len(series) < 2:
        return box + "</svg>"
    xs = [x for x, _ in series]
    y_max = max(y for _, y in series)
    line = _scale(series, width, height, (min(xs), max(xs)), y_max, 2)
    return f'{box}<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{line}"/></svg>'


def line_chart(
    title: str, series: Mapping[str, Series], width: int = 560, height: int = 200, y_label: str = ""
) -> str:
    """A labelled multi-series line chart (one colour per series, legend underneath)."""
    pad = 28
    drawn = {name: s for name, s in series.items() if len(s) >= 1}
    parts = [
        f'<figure class="chart"><figcaption>{escape(title)}</figcaption>',
        f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(title)}">',
        f'<rect x="{pad}" y="{pad}" width="{width - 2 * pad}" height="{height - 2 * pad}" '
        'fill="#f8fafc" stroke="#cbd5e1"/>',
    ]
    if not drawn:
        parts.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle">no data yet</text>')
    else:
        xs = [x for s in drawn.values() for x, _ in s]
        y_max = max((y for s in drawn.values() for _, y in s), default=0.0) or 1.0
        parts.append(f'<text x="2" y="{pad - 6}" font-size="10">{y_max:.3g} {escape(y_label)}</text>')
        for index, (name, s) in enumerate(drawn.items()):
            color = PALETTE[index % len(PALETTE)]
            points = _scale(s, width, height, (min(xs), max(xs)), y_max, pad)
            parts.append(
                f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{points}">'
                f"<title>{escape(name)}</title></polyline>"
            )
            if len(s) == 1:  # one point draws no line: mark it
                x, y = points.split(",")
                parts.append(f'<circle cx="{x}" cy="{y}" r="3" fill="{color}"/>')
    parts.append("</svg>")
    legend = "".join(
        f'<span class="key"><i style="background:{PALETTE[i % len(PALETTE)]}"></i>{escape(name)}</span>'
        for i, name in enumerate(drawn)
    )
    parts.append(f'<div class="legend">{legend}</div></figure>')
    return "".join(parts)
