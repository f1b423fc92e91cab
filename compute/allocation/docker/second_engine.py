"""A second Docker engine on this machine, as a "remote GPU host" for tests, the bench and the demo.

Drives ``scripts/second_dockerd.sh``: a ``dockerd`` in its own network namespace (10.203.N.2,
reached over TCP with mutual TLS), with its own data root, exec root, pidfile and socket, and the
base image loaded. :meth:`SecondEngine.stop` is a power cut (daemon, containerd, lease processes),
:meth:`start` brings it back, :meth:`down` removes everything. Root only (namespaces, a daemon).

Deliberately not here: anything a production miner runs (its hosts are real machines).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "second_dockerd.sh"
IMAGE = "compute-base:cpu"


def skip_reason() -> str | None:
    """Why a second engine cannot run here, or None."""
    if os.geteuid() != 0:
        return "a second dockerd in a network namespace needs root (CI runs as root)"
    if not SCRIPT.is_file():
        return f"{SCRIPT} is missing (run from a source checkout)"
    missing = [tool for tool in ("ip", "nsenter", "dockerd", "openssl", "docker") if not shutil.which(tool)]
    if missing:
        return f"missing tools for a second dockerd: {', '.join(missing)} (iproute2, util-linux, docker.io)"
    return None


@dataclass
class SecondEngine:
    """The engine under ``directory``; ``env`` holds DOCKER_HOST, ADDRESS, CA, CERT, KEY after ``up``."""

    directory: Path
    net: int = 17  # its addresses: 10.203.net.0/30 and its bridge 10.203.(net+1).0/24
    env: dict[str, str] | None = None

    def _run(self, *args: str, timeout: float = 300) -> str:
        done = subprocess.run(
            ["bash", str(SCRIPT), args[0], str(self.directory), *args[1:]],
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
        out = self._run("up", image)
        self.env = dict(line.split("=", 1) for line in out.strip().splitlines() if "=" in line)
        return self.env

    def stop(self) -> None:
        self._run("stop")

    def start(self) -> None:
        self._run("start")

    def down(self) -> None:
        self._run("down")

    def hosts_entry(self, name: str, ports: str) -> dict[str, object]:
        """This engine as a hosts-file entry (remote, mutual TLS, CPU only)."""
        if self.env is None:
            raise RuntimeError("SecondEngine.up() first")
        return {
            "name": name,
            "endpoint": self.env["DOCKER_HOST"],
            "tls": {"ca": self.env["CA"], "cert": self.env["CERT"], "key": self.env["KEY"]},
            "gpus": [],
            "ssh_host": self.env["ADDRESS"],
            "ssh_port_range": ports,
            "isolate": False,
        }


__all__ = ["IMAGE", "SecondEngine", "skip_reason"]
