"""A second Docker engine for tests: ``scripts/second_dockerd.sh`` in a network namespace, over mutual TLS.

:func:`second_engine_skip_reason` says why it cannot run here (not root, no ``ip``/``nsenter``/
``dockerd``/``openssl``); :class:`SecondEngine` starts it, kills it ("host down"), starts it again
and always removes everything (namespace, processes, directory) on ``down``, even after a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "second_dockerd.sh"
IMAGE = "compute-base:cpu"


def second_engine_skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "a second dockerd in a network namespace needs root (CI runs as root)"
    missing = [tool for tool in ("ip", "nsenter", "dockerd", "openssl", "docker") if not shutil.which(tool)]
    if missing:
        return f"missing tools for a second dockerd: {', '.join(missing)} (iproute2, util-linux, docker.io)"
    return None


@dataclass
class SecondEngine:
    """The engine under ``directory``; ``env`` holds DOCKER_HOST, ADDRESS, CA, CERT, KEY after ``up``."""

    directory: Path
    net: int = 17
    env: dict[str, str] | None = None

    def _run(self, *args: str, timeout: float = 180) -> str:
        done = subprocess.run(
            ["bash", str(SCRIPT), *args, str(self.directory)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "SECOND_DOCKERD_NET": str(self.net)},
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"second_dockerd.sh {args[0]} failed: {done.stderr[-2000:]}")
        return done.stdout

    def up(self, image: str = IMAGE) -> dict[str, str]:
        out = subprocess.run(
            ["bash", str(SCRIPT), "up", str(self.directory), image],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "SECOND_DOCKERD_NET": str(self.net)},
            check=False,
        )
        if out.returncode != 0:
            raise RuntimeError(f"second_dockerd.sh up failed: {out.stderr[-2000:]}")
        self.env = dict(line.split("=", 1) for line in out.stdout.strip().splitlines() if "=" in line)
        return self.env

    def stop(self) -> None:
        self._run("stop")

    def start(self) -> None:
        self._run("start")

    def down(self) -> None:
        self._run("down")

    def hosts_entry(self, name: str, ports: str) -> dict[str, object]:
        """This engine as a hosts-file entry (remote, mutual TLS, CPU only)."""
        assert self.env is not None, "call up() first"
        return {
            "name": name,
            "endpoint": self.env["DOCKER_HOST"],
            "tls": {"ca": self.env["CA"], "cert": self.env["CERT"], "key": self.env["KEY"]},
            "gpus": [],
            "ssh_host": self.env["ADDRESS"],
            "ssh_port_range": ports,
            "isolate": False,
        }
