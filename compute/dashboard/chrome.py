"""What every dashboard page shares: the style sheet, the navigation bar, ages and the stale mark.

The style keeps each page within 1280 CSS pixels: tables take the page's width and long text (a
verdict's reason, a hotkey) wraps or is cut with its whole text on hover, never widening the page.
Pure string building; no I/O.
"""

from __future__ import annotations

import time
from html import escape

CSS = """
*{box-sizing:border-box}
body{font:13px system-ui,sans-serif;margin:12px 16px;color:#0f172a;max-width:1880px}
h1{font-size:18px;margin:0 0 8px}h2{font-size:15px;margin:16px 0 6px}
nav{display:flex;gap:14px;margin:0 0 10px;font-size:13px}
nav a{color:#1d4ed8;text-decoration:none}nav a.here{font-weight:600;color:#0f172a}
a{color:#1d4ed8}
.cards{display:flex;gap:12px;flex-wrap:wrap;margin-bottom:12px}
.card{border:1px solid #cbd5e1;border-radius:6px;padding:8px 12px;min-width:130px}
.card b{display:block;font-size:16px}
.bar{background:#e2e8f0;height:8px;border-radius:4px;margin-top:4px}
.bar i{display:block;height:8px;border-radius:4px;background:#2563eb}
.charts{display:flex;gap:16px;flex-wrap:wrap}
.charts svg{max-width:100%;height:auto}
figure{margin:0}figcaption{font-weight:600}
.legend{display:flex;gap:8px;flex-wrap:wrap;font-size:11px}
.key i{display:inline-block;width:10px;height:10px;margin-right:3px}
table{border-collapse:collapse;margin-top:8px;width:100%}
th,td{border-bottom:1px solid #e2e8f0;padding:3px 5px;text-align:right;white-space:nowrap;vertical-align:top}
th{background:#f1f5f9}td.l,th.l{text-align:left}
td.wrap{white-space:normal;max-width:320px;overflow-wrap:anywhere}
.ok{color:#16a34a}.fail{color:#dc2626}.none{color:#64748b}.why{color:#475569;font-size:.85em}
.rented{color:#1d4ed8}.stale{color:#b45309;font-weight:600}
.terms td{text-align:left;white-space:normal}.terms td:first-child{width:180px;color:#475569}
code.line{display:block;white-space:pre-wrap;overflow-wrap:anywhere;background:#f8fafc;
border:1px solid #e2e8f0;padding:6px;margin-top:6px;font-size:12px}
"""

PAGES = (("/", "Overview"), ("/machines", "Machines"), ("/api/overview", "JSON"))


def fmt(value: float | None, digits: int = 3) -> str:
    """Significant digits, so a CPU demo's 0.004 TFLOPS and an H100's 742 both read right; whole
    numbers from 1000 up (a bandwidth of 3350, never 3.35e+03)."""
    if value is None:
        return "—"
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.{digits}g}"


def nav(here: str) -> str:
    """Links between the overview, the machines page and the JSON (``here`` is not a link)."""
    links = "".join(
        f'<a class="here" href="{path}">{label}</a>' if path == here else f'<a href="{path}">{label}</a>'
        for path, label in PAGES
    )
    return f"<nav>{links}</nav>"


def ago(ts: float | None, now: float) -> str:
    """How long ago ``ts`` was: seconds, minutes, hours, then the date."""
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


def aged(ts: float | None, now: float, stale_s: float) -> str:
    """``ago`` as HTML, marked stale (with the moment on hover) past ``stale_s``."""
    text = ago(ts, now)
    if not ts:
        return text
    moment = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts))
    if now - ts > stale_s:
        return (
            f'<span class="stale" title="{moment}: older than {stale_s / 60:.0f} min">{text} · stale</span>'
        )
    return f'<span title="{moment}">{text}</span>'


def miner_link(uid: int, text: str | None = None) -> str:
    return f'<a href="/miner/{int(uid)}">{escape(text if text is not None else str(uid))}</a>'


def page(title: str, here: str, body: str, refresh_s: int) -> str:
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta http-equiv="refresh" content="{refresh_s}"><style>{CSS}</style></head><body>'
        f"{nav(here)}<h1>{escape(title)}</h1>{body}</body></html>"
    )


__all__ = ["CSS", "ago", "aged", "fmt", "miner_link", "nav", "page"]
