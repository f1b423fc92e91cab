"""A miner's asking price: ``--miner.price`` (env ``COMPUTE_MINER_PRICE``) to the signed ``Price``.

``--miner.price "H100=2.50,A100=1.20,base=0.05"``: USD per GPU-hour for each GPU model (model
words, matched like a renter's ``--gpu-model``: case and punctuation do not matter, whole words
only) and ``base`` per lease-hour whatever its GPUs (a CPU rental's whole price). ``parse_price``
checks the text (``PriceError`` names what is wrong); ``price_for`` turns it into the protocol's
``Price`` for the GPUs this miner rents out, keyed by their names, so a renter reads the price of
exactly the GPU it is shown. A GPU no model word matches has no price; the miner answers
``PriceRequest`` with it, signed.

What it deliberately does not do: charge anyone (how a renter pays is agreed outside the subnet),
or change any score: validators never read it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from compute.protocol import GpuSpec, Price

MAX_PRICE = 1e6  # USD per hour: far past any real GPU, a typo's bound
_ENTRY_RE = re.compile(r"^\s*([^=]+?)\s*=\s*([^=\s]+)\s*$")


class PriceError(ValueError):
    """``--miner.price`` does not parse; the message says which part and why."""


@dataclass(frozen=True)
class PriceList:
    base_hour: float = 0.0
    models: tuple[tuple[str, float], ...] = field(default_factory=tuple)  # (model words, USD per GPU-hour)


def _words(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", name.lower()).strip()


def parse_price(text: str) -> PriceList:
    """``MODEL=USD[,MODEL=USD...][,base=USD]``; empty text: no price."""
    base, models = 0.0, []
    for part in (p for p in text.split(",") if p.strip()):
        match = _ENTRY_RE.match(part)
        if match is None:
            raise PriceError(f"{part.strip()!r}: expected MODEL=USD (e.g. H100=2.50) or base=USD")
        name, raw = match.group(1), match.group(2)
        try:
            value = float(raw)
        except ValueError:
            raise PriceError(f"{part.strip()!r}: {raw!r} is not a number of USD per hour") from None
        if not math.isfinite(value) or not 0 <= value <= MAX_PRICE:
            raise PriceError(f"{part.strip()!r}: the price must be between 0 and {MAX_PRICE:g} USD per hour")
        if name.strip().lower() == "base":
            base = value
        elif not _words(name):
            raise PriceError(f"{part.strip()!r}: name a GPU model (e.g. H100) or base")
        else:
            models.append((_words(name), value))
    return PriceList(base, tuple(models))


def price_for(prices: PriceList, gpus: Sequence[GpuSpec]) -> Price:
    """The signed price of these GPUs: each GPU name priced by the first model its words match."""
    per_gpu = {}
    for gpu in gpus:
        have = f" {_words(gpu.name)} "
        found = next((usd for words, usd in prices.models if f" {words} " in have), None)
        if found is not None:
            per_gpu[gpu.name] = found
    return Price(base_hour=prices.base_hour, gpu_hour=per_gpu)


def lease_price(price: Price | None, gpus: Sequence[GpuSpec]) -> float | None:
    """USD per hour of a lease holding ``gpus`` at ``price``: its base plus each GPU's price;
    None when the miner names no price or leaves one of these GPUs unpriced."""
    if price is None:
        return None
    per_gpu = [price.gpu_hour.get(gpu.name) for gpu in gpus]
    if None in per_gpu:
        return None
    return round(price.base_hour + sum(p for p in per_gpu if p is not None), 6)


__all__ = ["MAX_PRICE", "PriceError", "PriceList", "lease_price", "parse_price", "price_for"]
