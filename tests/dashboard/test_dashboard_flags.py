"""The dashboard's validator flags: off and loopback by default, bounded, and a taken port never
stops the validator (it logs and goes on without a dashboard)."""

from __future__ import annotations

import asyncio
import logging
import socket

import pytest

from compute.dashboard import serve_dashboard
from compute.settings import SettingsError
from compute.validator import parse_validator


def test_dashboard_is_off_and_loopback_by_default() -> None:
    s = parse_validator([], {})
    assert (s.dashboard_port, s.dashboard_host) == (0, "127.0.0.1")
    s = parse_validator(["--dashboard.port", "8090", "--dashboard.host", "0.0.0.0"], {})
    assert (s.dashboard_port, s.dashboard_host) == (8090, "0.0.0.0")
    assert parse_validator([], {"COMPUTE_DASHBOARD_PORT": "9000"}).dashboard_port == 9000
    with pytest.raises(SettingsError, match="--dashboard.port"):
        parse_validator(["--dashboard.port", "70000"], {})


def test_port_zero_serves_nothing_and_a_taken_port_is_logged_not_fatal(tmp_path, caplog) -> None:
    async def go() -> None:
        off = serve_dashboard(tmp_path / "v.db", "127.0.0.1", 0)
        assert off.task is None and off.url == ""
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            with caplog.at_level(logging.ERROR, logger="compute.dashboard.server"):
                busy = serve_dashboard(tmp_path / "v.db", "127.0.0.1", taken.getsockname()[1])
            assert busy.task is None
        await off.close()

    asyncio.run(go())
    assert "dashboard disabled: cannot bind" in caplog.text


def test_served_inside_an_event_loop_until_the_stop_event(filled_store) -> None:
    import httpx

    async def go() -> None:
        stop = asyncio.Event()
        dash = serve_dashboard(filled_store, "127.0.0.1", _free_port(), stop)
        assert dash.task is not None
        async with httpx.AsyncClient() as client:
            for _ in range(100):
                try:
                    page = await client.get(dash.url, timeout=10)
                    break
                except httpx.ConnectError:
                    await asyncio.sleep(0.05)
            assert page.status_code == 200 and "Round 3 (running)" in page.text
        stop.set()
        await asyncio.wait_for(dash.task, 10)

    asyncio.run(go())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
