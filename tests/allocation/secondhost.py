"""The second Docker engine of the multi-host tests (see ``compute.allocation.docker.second_engine``)."""

from __future__ import annotations

from compute.allocation.docker.second_engine import IMAGE, SecondEngine
from compute.allocation.docker.second_engine import skip_reason as second_engine_skip_reason

__all__ = ["IMAGE", "SecondEngine", "second_engine_skip_reason"]
