"""Compute subnet: Proof-of-GPU verified, rentable GPU machines on Bittensor."""

from __future__ import annotations

__version__ = "0.1.0"


def _version_key(version: str) -> int:
    """Encode ``MAJOR.MINOR.PATCH`` as MAJOR*1_000_000 + MINOR*1_000 + PATCH (no collisions below 1000)."""
    major, minor, patch = (int(part) for part in version.split(".")[:3])
    if not (0 <= minor < 1000 and 0 <= patch < 1000):
        raise ValueError(f"version component out of range: {version}")
    return major * 1_000_000 + minor * 1_000 + patch


VERSION_KEY = _version_key(__version__)

__all__ = ["VERSION_KEY", "__version__"]
