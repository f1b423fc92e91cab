"""``ssh://`` Docker hosts reached through the system ssh client, with bounded connects.

The Docker SDK's shell-out transport runs ``ssh -- HOST docker system dial-stdio`` with no options:
a host that takes the TCP connection and never sends its banner keeps that call (and its thread)
forever. :func:`bound_ssh` mounts the same transport with options that bound it: a connect and
banner timeout, keep-alives that end a session whose host stopped answering, and batch mode (never
a password prompt on the miner's terminal). Host keys stay the user's ``known_hosts`` as before.

What it deliberately does not do: manage keys or ``~/.ssh/config`` (the operator's).
"""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Any

from docker.transport import sshconn

CONNECT_TIMEOUT_S = 10
ALIVE_INTERVAL_S = 5
ALIVE_COUNT = 3
OPTIONS = (
    "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}",
    "-o", f"ServerAliveInterval={ALIVE_INTERVAL_S}",
    "-o", f"ServerAliveCountMax={ALIVE_COUNT}",
    "-o", "BatchMode=yes",
)  # fmt: skip


def ssh_argv(host: str, user: str | None, port: str | None) -> list[str]:
    """The ssh command line of one connection to ``host``'s ``docker system dial-stdio``."""
    args = ["ssh", *OPTIONS]
    if user:
        args += ["-l", user]
    if port:
        args += ["-p", port]
    return args + ["--", host, "docker system dial-stdio"]


class _Socket(sshconn.SSHSocket):
    def connect(self, **kwargs: Any) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "SSL_CERT_FILE")}
        self.proc = subprocess.Popen(
            ssh_argv(self.host, self.user, self.port),
            env=env,
            stdout=subprocess.PIPE,
            stdin=subprocess.PIPE,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),  # noqa: PLW1509
        )


class _Connection(sshconn.SSHConnection):
    def connect(self) -> None:
        sock = _Socket(self.ssh_host)
        sock.settimeout(self.timeout)
        sock.connect()
        self.sock = sock


class _Pool(sshconn.SSHConnectionPool):
    def _new_conn(self) -> _Connection:
        return _Connection(None, self.timeout, self.ssh_host)


class _Adapter(sshconn.SSHHTTPAdapter):
    def get_connection(self, url: Any, proxies: Any = None) -> _Pool:
        return _Pool(ssh_client=None, timeout=self.timeout, maxsize=self.max_pool_size, host=self.ssh_host)


def bound_ssh(client: Any, base_url: str, timeout_s: int) -> None:
    """Replace the ssh transport of a ``docker.DockerClient`` made with ``use_ssh_client=True``."""
    adapter = _Adapter(base_url, timeout=timeout_s, shell_out=True)
    client.api.mount("http+docker://ssh", adapter)
    client.api._custom_adapter = adapter


__all__ = ["OPTIONS", "bound_ssh", "ssh_argv"]
