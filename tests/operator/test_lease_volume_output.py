"""`list` and `status` say which persistent volume a lease carries (from the lease book)."""

from __future__ import annotations

import io

from operator_helpers import book_entry
from rich.console import Console

from compute.operator.output import show_lease, show_leases


def _render(draw) -> str:
    buffer = io.StringIO()
    draw(Console(file=buffer, width=220, color_system=None))
    return buffer.getvalue()


def test_list_has_a_volume_column_only_when_a_lease_has_a_volume() -> None:
    plain = book_entry("a" * 32)
    with_volume = plain.with_changes(
        lease_id="b" * 32, requirements={"gpu_count": 1, "volume": {"name": "alpha", "size_gb": 0.2}}
    )
    both = _render(lambda c: show_leases(c, [with_volume, plain], 1.0, {}))
    assert "Volume (/workspace)" in both and "alpha (0.2 GB)" in both
    row_plain = next(line for line in both.splitlines() if "a" * 32 in line)
    assert row_plain.rstrip(" │").endswith("-")  # the lease without a volume shows "-"
    assert "Volume" not in _render(lambda c: show_leases(c, [plain], 1.0, {}))


def test_status_names_the_volume_and_where_it_is_mounted() -> None:
    entry = book_entry("c" * 32).with_changes(requirements={"volume": {"name": "data"}})
    assert "data at /workspace" in _render(lambda c: show_lease(c, entry, None, 1.0, "Lease"))
    assert "Volume" not in _render(lambda c: show_lease(c, book_entry("d" * 32), None, 1.0, "Lease"))
