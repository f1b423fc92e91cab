"""Read-only validator dashboard: a server-rendered page and JSON views over the validator store.

``serve_dashboard`` runs it inside the validator (``--dashboard.port``); ``build_app`` gives the
FastAPI app for any store file; ``python -m compute dashboard`` serves a store on its own.
"""

from __future__ import annotations

from compute.dashboard.app import build_app
from compute.dashboard.models import ProvenMachine, ProvenMachines, proven_machine
from compute.dashboard.render import render_page
from compute.dashboard.server import Dashboard, serve_dashboard

__all__ = [
    "Dashboard",
    "ProvenMachine",
    "ProvenMachines",
    "build_app",
    "proven_machine",
    "render_page",
    "serve_dashboard",
]
