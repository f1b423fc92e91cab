"""The hosts file: which Docker engines one miner rents out, and how each is reached.

``--miner.hosts_file`` names a YAML file (see ``config/hosts.example.yaml``)::

    hosts:
      - name: rack1-a            # unique, [a-z0-9-], at most 32 characters
        endpoint: unix:///var/run/docker.sock
        gpus: [0, 1]             # device indices on that host to offer ([] = CPU-only)
        ssh_host: 203.0.113.10   # address renters SSH to (that host's public address)
        ssh_port_range: 40000-40999
      - name: rack1-b
        endpoint: tcp://10.0.0.12:2376
        tls: {ca: /etc/compute/ca.pem, cert: /etc/compute/cert.pem, key: /etc/compute/key.pem}
        gpus: [0, 1, 2, 3]
        ssh_host: 203.0.113.11
        ssh_port_range: 41000-41999
        isolate: false           # required off this machine: its firewall is the host's own
        deadline_s: 30           # seconds one Docker API call may take (default 30); missed: down

The miner's GPU indices are global: the hosts' GPUs in file order (rack1-a 0,1 -> 0,1; rack1-b
0..3 -> 2..5). Leases store them, so append hosts at the end and never reorder the file while
leases run. Without a hosts file the miner rents out its own engine as before.

Deliberately not here: connecting (``compute.allocation.hosts.backend`` does), or credentials
themselves (the file names certificate paths, never holds keys).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

MAX_GPUS = 64  # the wire's GpuSpec index bound
_HOST_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")
_ENDPOINT = re.compile(r"(unix:///\S+|tcp://[^\s/]+:\d{1,5}|ssh://[^\s/]+(:\d{1,5})?)")


class HostsFileError(ValueError):
    """A hosts file that cannot be used; the message names the file and the problem."""


def _name(value: str) -> str:
    if not _HOST_NAME.fullmatch(value):
        raise ValueError(
            "host names are 1-32 characters of a-z, 0-9 and '-', starting with a letter or digit"
        )
    return value


HostName = Annotated[str, AfterValidator(_name)]


class TlsFiles(BaseModel):
    """Mutual TLS for a ``tcp://`` endpoint: the CA that signed the daemon, and this miner's cert/key."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ca: Path
    cert: Path
    key: Path

    @model_validator(mode="after")
    def _exist(self) -> TlsFiles:
        missing = [str(p) for p in (self.ca, self.cert, self.key) if not p.expanduser().is_file()]
        if missing:
            raise ValueError(f"TLS file(s) not found: {', '.join(missing)}")
        return self


class HostEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: HostName
    endpoint: str = Field(max_length=512)
    tls: TlsFiles | None = None
    gpus: list[int] = Field(default_factory=list, max_length=MAX_GPUS)
    ssh_host: str = Field(min_length=1, max_length=255)
    ssh_port_range: str = Field("40000-40999", pattern=r"^\d{1,5}-\d{1,5}$")
    isolate: bool | None = None  # None: on for unix://, must be set false for remote endpoints
    deadline_s: float = Field(30.0, ge=1.0, le=600.0)  # one Docker API call; missed: the host is down

    @model_validator(mode="after")
    def _consistent(self) -> HostEntry:
        if not _ENDPOINT.fullmatch(self.endpoint):
            raise ValueError(
                f"endpoint {self.endpoint!r}: expected unix:///path, tcp://host:port or ssh://user@host"
            )
        if self.endpoint.startswith("tcp://") and self.tls is None:
            raise ValueError(
                f"endpoint {self.endpoint}: a tcp:// endpoint needs tls (ca, cert, key): "
                "an unauthenticated Docker API is root on that host"
            )
        if self.tls is not None and not self.endpoint.startswith("tcp://"):
            raise ValueError("tls applies to tcp:// endpoints only")
        if self.isolate and not self.endpoint.startswith("unix://"):
            raise ValueError(
                "isolate: true needs the miner's own iptables, which only reach a local engine; set "
                "isolate: false and firewall that host's lease network there (docs/architecture.md)"
            )
        if not self.endpoint.startswith("unix://") and self.isolate is None:
            raise ValueError("a remote host needs an explicit isolate: false (its firewall is its own)")
        if len(set(self.gpus)) != len(self.gpus) or any(not 0 <= g < MAX_GPUS for g in self.gpus):
            raise ValueError(f"gpus {self.gpus}: distinct device indices 0..{MAX_GPUS - 1}")
        low, high = (int(p) for p in self.ssh_port_range.split("-"))
        if not 1024 <= low <= high <= 65535:
            raise ValueError(f"ssh_port_range {self.ssh_port_range}: need 1024 <= LOW <= HIGH <= 65535")
        return self


class HostsFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    hosts: list[HostEntry] = Field(min_length=1, max_length=MAX_GPUS)

    @model_validator(mode="after")
    def _unique(self) -> HostsFile:
        names = [h.name for h in self.hosts]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"host names must be unique; repeated: {', '.join(dupes)}")
        endpoints = [h.endpoint for h in self.hosts]
        if len(set(endpoints)) != len(endpoints):
            raise ValueError("two hosts name the same endpoint (one engine is one host)")
        if sum(len(h.gpus) for h in self.hosts) > MAX_GPUS:
            raise ValueError(f"at most {MAX_GPUS} GPUs in all hosts together")
        return self


@dataclass(frozen=True)
class HostConfig:
    """One host after validation; ``global_gpus[i]`` is the miner-wide index of ``gpus[i]``."""

    name: str
    endpoint: str
    gpus: tuple[int, ...]
    global_gpus: tuple[int, ...]
    ssh_host: str
    ssh_port_range: tuple[int, int]
    isolate: bool
    tls: tuple[Path, Path, Path] | None = None  # ca, cert, key
    deadline_s: float = 30.0  # one Docker API call to this host; a missed deadline marks it down

    @property
    def remote(self) -> bool:
        return not self.endpoint.startswith("unix://")


def parse_hosts(data: object, source: str = "hosts file") -> tuple[HostConfig, ...]:
    """Validate parsed YAML; raises :class:`HostsFileError` naming ``source`` and each problem."""
    try:
        parsed = HostsFile.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'top level'}: {err['msg']}" for err in exc.errors()
        )
        raise HostsFileError(f"{source}: {problems}") from None
    hosts, next_index = [], 0
    for entry in parsed.hosts:
        low, high = (int(p) for p in entry.ssh_port_range.split("-"))
        tls = None
        if entry.tls is not None:
            tls = (entry.tls.ca.expanduser(), entry.tls.cert.expanduser(), entry.tls.key.expanduser())
        hosts.append(
            HostConfig(
                name=entry.name,
                endpoint=entry.endpoint,
                gpus=tuple(entry.gpus),
                global_gpus=tuple(range(next_index, next_index + len(entry.gpus))),
                ssh_host=entry.ssh_host,
                ssh_port_range=(low, high),
                isolate=bool(entry.isolate) if entry.isolate is not None else True,
                tls=tls,
                deadline_s=entry.deadline_s,
            )
        )
        next_index += len(entry.gpus)
    return tuple(hosts)


def load_hosts(path: str | Path) -> tuple[HostConfig, ...]:
    """Read and validate a hosts file; every failure is a :class:`HostsFileError` naming the file."""
    file = Path(path).expanduser()
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise HostsFileError(f"{file}: cannot read the hosts file: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise HostsFileError(f"{file}: not valid YAML: {exc}") from None
    return parse_hosts(data, str(file))


__all__ = ["HostConfig", "HostEntry", "HostsFile", "HostsFileError", "TlsFiles", "load_hosts", "parse_hosts"]
