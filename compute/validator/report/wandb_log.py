"""Optional wandb logging of rounds: off unless configured, quiet, harmless when absent or failing.

:func:`wandb_wanted` decides: on with ``WANDB_API_KEY`` (online) or ``--wandb.on`` (offline
without a key), always off with ``--wandb.off``, off otherwise. ``WandbLogger`` imports wandb
lazily and runs it silent (no banner, no console capture, no deprecation warnings); if it is not
installed, cannot start, or any call raises, it logs one warning and turns itself off. The
validator never depends on it: no state is read back from wandb and nothing is shared through it.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal

from compute.store import PogResult

log = logging.getLogger(__name__)


_FIGURES = (
    "tflops_fp16",
    "tflops_fp32",
    "mem_gbs",
    "mem_proven_gb",
    "sustained_ratio",
    "sustained_factor",
    "scaling_efficiency",
    "credited_gpus",
)


def result_figures(result: PogResult) -> dict[str, float]:
    """``uid/<uid>/<figure>`` for every measured figure of a result (throttling: ``sustained_*``)."""
    data: dict[str, float] = {}
    for name in _FIGURES:
        value = getattr(result, name)
        if value is not None:
            data[f"uid/{result.uid}/{name}"] = value
    if result.sustained_factor is not None:
        data[f"uid/{result.uid}/throttled"] = int(result.sustained_factor < 1.0)
    for name, value in result.host.items():
        data[f"uid/{result.uid}/host_{name}"] = value
    return data


def wandb_wanted(off: bool, on: bool, api_key: str | None) -> tuple[bool, str]:
    """(enabled, why) from ``--wandb.off``, ``--wandb.on`` and whether a key is configured."""
    if off:
        return False, "wandb off (--wandb.off)"
    if api_key:
        return True, "wandb on (WANDB_API_KEY set)"
    if on:
        return True, "wandb on, offline (--wandb.on without WANDB_API_KEY)"
    return False, "wandb off (set WANDB_API_KEY or pass --wandb.on to log rounds)"


class WandbLogger:
    def __init__(
        self,
        enabled: bool,
        project: str,
        run_name: str,
        directory: Path,
        api_key: str | None = None,
        config: Mapping[str, object] | None = None,
    ) -> None:
        self._run = None
        if not enabled:
            return
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # wandb's own deprecation chatter is not ours to show
                import wandb

                mode: Literal["online", "offline"] = "online" if api_key else "offline"
                if api_key:
                    wandb.login(key=api_key, relogin=False)
                directory.mkdir(parents=True, exist_ok=True)
                self._run = wandb.init(
                    project=project,
                    name=run_name,
                    mode=mode,
                    dir=str(directory),
                    config=dict(config or {}),
                    settings=wandb.Settings(silent=True, console="off"),
                )
            log.info("wandb logging %s project=%s dir=%s", mode, project, directory)
        except Exception as exc:  # optional dependency boundary
            log.warning("wandb disabled: %s: %s", type(exc).__name__, exc)
            self._run = None

    @property
    def active(self) -> bool:
        return self._run is not None

    def log_round(
        self,
        round_id: int,
        results: Iterable[PogResult],
        scores: Mapping[int, float],
        weights: Mapping[int, float],
    ) -> None:
        if self._run is None:
            return
        rows = list(results)
        data: dict[str, object] = {
            "round": round_id,
            "miners_tested": len(rows),
            "miners_verified": sum(r.ok and not r.rented for r in rows),
        }
        for r in rows:
            data[f"uid/{r.uid}/score"] = scores.get(r.uid, 0.0)
            data[f"uid/{r.uid}/weight"] = weights.get(r.uid, 0.0)
            data[f"uid/{r.uid}/ok"] = int(r.ok)
            data.update(result_figures(r))
        try:
            self._run.log(data)
        except Exception as exc:  # optional dependency boundary
            log.warning("wandb log failed, disabling: %s", exc)
            self._run = None

    def close(self) -> None:
        if self._run is not None:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    self._run.finish()
            except Exception as exc:  # optional dependency boundary
                log.warning("wandb finish failed: %s", exc)
            self._run = None
