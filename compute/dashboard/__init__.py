"""Read-only validator dashboard: a server-rendered page and JSON views over the validator store.

``start_dashboard`` runs it for the validator (``--dashboard.port``) in a child process, away from
the validator's clock; ``serve_dashboard`` serves it on the running loop (that child, and
``python -m compute dashboard``); ``build_app`` gives the FastAPI app for any store file. Public
view by default (``views``); ``--dashboard.full`` for the operator's full one.
"""

from __future__ import annotations

from compute.dashboard.app import build_app
from compute.dashboard.models import ProvenMachine, ProvenMachines, proven_machine
from compute.dashboard.process import DashboardOptions, DashboardProcess, start_dashboard
from compute.dashboard.render import render_page
from compute.dashboard.server import Dashboard, serve_dashboard
from compute.dashboard.views import public_overview, public_reason

__all__ = [
    "Dashboard",
    "DashboardOptions",
    "DashboardProcess",
    "ProvenMachine",
    "ProvenMachines",
    "build_app",
    "proven_machine",
    "public_overview",
    "public_reason",
    "render_page",
    "serve_dashboard",
    "start_dashboard",
]
