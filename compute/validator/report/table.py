"""A rich console table of one round: uid, hotkey, GPUs, TFLOPS, memory GB/s, sustained ratio
(throttling shown in yellow), scaling efficiency, verdict, score, weight, a legend, and under it one
line per miner with its sample's terms (``compute.scoring.explain``: per-GPU value and the model
credited, host, sustained, rental factors, the EMA step, presence share, collateral, why a zero).

People-facing output only; it reads values and prints, nothing else. Every text a miner supplied
(reasons, model and host names) is placed through ``compute.peertext.for_rich``: printable, and
never read as rich markup. Under pm2 or any pipe rich
would assume 80 columns and cut the table: off a terminal it prints at :data:`LOG_WIDTH` (or
``COLUMNS`` when wider) so every column stays readable in log files.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import TextIO

from rich.console import Console
from rich.table import Table

from compute.peertext import for_rich
from compute.scoring import Explanation
from compute.store import PogResult


def _gpus(result: PogResult) -> str:
    gpus = ", ".join(f"{n}x {for_rich(model)}" for model, n in Counter(result.models).items()) or "-"
    if not result.hosts:
        return gpus
    hosts = ", ".join(
        for_rich(name) if value > 0 else f"[yellow]{for_rich(name)}: 0[/yellow]"
        for name, value in result.hosts.items()
    )
    return f"{gpus} on hosts {hosts}"


def _verdict(result: PogResult) -> str:
    if result.reasons and result.reasons[0].startswith("shared device"):
        return f"[yellow]{for_rich(result.reasons[0].split(' (')[0])}[/yellow]"
    if result.rented:
        return "[cyan]rented[/cyan]"
    if result.ok:
        return "[green]verified[/green]"
    reason = result.reasons[0] if result.reasons else "failed"
    return f"[red]{for_rich(reason, 60)}[/red]"


def _tflops(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _mem(result: PogResult) -> str:
    if result.mem_gbs is None:
        return "-"
    text = f"{result.mem_gbs:.3g}"
    return text if result.mem_proven_gb else f"[yellow]{text} unproven[/yellow]"


def _sustained(result: PogResult) -> str:
    if result.sustained_ratio is None:
        return "-"
    text = f"{result.sustained_ratio:.2f}"
    if result.sustained_factor is not None and result.sustained_factor < 1.0:
        return f"[yellow]{text} throttled ×{result.sustained_factor:.2f}[/yellow]"
    return text


def _scaling(result: PogResult) -> str:
    if result.scaling_efficiency is None:
        return "-"
    text = f"{result.scaling_efficiency:.2f}"
    if result.credited_gpus is not None and result.credited_gpus < result.gpu_count:
        return f"[yellow]{text} ({result.credited_gpus}/{result.gpu_count} credited)[/yellow]"
    return text


COLUMNS = (
    "uid",
    "hotkey",
    "GPUs",
    "TFLOPS fp16",
    "TFLOPS fp32",
    "mem GB/s",
    "sustained",
    "scaling",
    "verdict",
    "score",
    "weight",
)


def round_table(
    round_id: int, results: Iterable[PogResult], scores: Mapping[int, float], weights: Mapping[int, float]
) -> Table:
    table = Table(title=f"Proof-of-GPU round {round_id}")
    for column in COLUMNS:
        table.add_column(column, justify="right" if column in ("uid", "score", "weight") else "left")
    for result in sorted(results, key=lambda r: r.uid):
        table.add_row(
            str(result.uid),
            for_rich(result.hotkey, 10),
            _gpus(result),
            _tflops(result.tflops_fp16),
            _tflops(result.tflops_fp32),
            _mem(result),
            _sustained(result),
            _scaling(result),
            _verdict(result),
            f"{scores.get(result.uid, 0.0):.4g}",
            f"{weights.get(result.uid, 0.0):.4f}",
        )
    return table


LOG_WIDTH = 220
LEGEND = (
    'TFLOPS, mem GB/s: measured on this validator\'s clock; "unproven": the memory proof failed',
    "sustained: throughput over the last fifth of a long run ÷ over its first fifth (above 1: sped up "
    'while warming, never rewarded); "throttled ×F": below 0.90, the GPU score is multiplied by F',
    'scaling: all GPUs together ÷ each alone; "(c/n credited)": GPUs paid for of those claimed',
    'score: moving average of round samples; weight: its share, as set on chain; "-": not measured',
    'hosts: a multi-host miner\'s hosts, each proven alone; "name: 0": unproven, down or the same device '
    "as another host (credited once)",
)


def log_console(file: TextIO | None = None) -> Console:
    """A console for people: the terminal's width on a TTY, wide enough for every column off one."""
    stream = file if file is not None else sys.stdout
    if stream.isatty():
        return Console(file=stream)
    columns = os.environ.get("COLUMNS", "")
    width = max(LOG_WIDTH, int(columns)) if columns.isdigit() else LOG_WIDTH
    return Console(file=stream, width=width, no_color=True)


EXPLAINED_CHARS = 600  # of one miner's explanation line (its zero reason quotes the miner)


def print_round_table(
    table: Table, console: Console | None = None, explanations: Mapping[int, Explanation] | None = None
) -> None:
    console = console or log_console()
    console.print(table)
    for line in LEGEND:
        console.print(f"  {line}", style="dim", highlight=False, soft_wrap=True)
    if explanations:
        console.print(
            "  why each sample (per GPU × factors = sample; EMA step; × presence × collateral = credit):"
        )
        for uid in sorted(explanations):
            text = for_rich(explanations[uid].line(), EXPLAINED_CHARS)
            console.print(f"  {text}", highlight=False, soft_wrap=True)
