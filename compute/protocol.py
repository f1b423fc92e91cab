"""The wire protocol: every message a validator or operator sends a miner, and its answer.

One pydantic model per action, tagged with a literal ``kind`` and the protocol version; unknown
fields are rejected and every field is bounded, so a hostile peer cannot make the other side
allocate without limit. Transport (signing, routing, status codes) lives in ``compute.transport``;
what a miner does with a request lives in ``compute.miner`` and ``compute.allocation``.

Lease-changing requests carry the lease id; the miner binds them to the hotkey that created the
lease (authenticated by the transport), so nobody else can end, extend, or re-key a rental.
"""

from __future__ import annotations

import re
from typing import Annotated, Final, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from compute.peertext import PeerText

PROTOCOL_VERSION: Final = 1

MAX_LEASE_SECONDS = 90 * 24 * 3600
MIN_LEASE_SECONDS = 60
MIN_IDLE_SECONDS = 600  # the shortest idle stop: ten one-minute samples of the miner's idle watch

_SSH_KEY_RE = re.compile(
    r"^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp256|ecdsa-sha2-nistp384|ecdsa-sha2-nistp521)"
    r" [A-Za-z0-9+/]{16,8192}={0,3}( [A-Za-z0-9_.@+:-]{1,128})?$"
)
_SS58_RE = re.compile(r"^[1-9A-HJ-NP-Za-km-z]{46,48}$")
_LEASE_ID_RE = re.compile(r"^[a-f0-9]{32}$")
_NAME_RE = re.compile(r"^[A-Za-z0-9 ._()+-]{1,64}$")
_IDEMPOTENCY_RE = re.compile(r"^[A-Za-z0-9_-]{8,64}$")
_TEMPLATE_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,47}$")
_IMAGE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}$")
_VOLUME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
_HOST_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}$")
_EVM_RE = re.compile(r"^0x[0-9a-fA-F]{40}$")
# where a renter's ssh command connects, and as whom: never a leading "-" (an ssh option), no spaces
_SSH_HOST_RE = re.compile(r"^(?!-)[A-Za-z0-9.:_-]{1,255}$")
_SSH_USER_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")


def _check(pattern: re.Pattern[str], what: str):
    def validate(value: str) -> str:
        if not pattern.fullmatch(value):
            raise ValueError(f"not a valid {what}")
        return value

    return AfterValidator(validate)


SshPublicKey = Annotated[
    str,
    Field(max_length=8400, description="one OpenSSH public key line"),
    _check(_SSH_KEY_RE, "OpenSSH public key (ssh-ed25519, ssh-rsa or ecdsa, one line)"),
]
Hotkey = Annotated[str, Field(max_length=48), _check(_SS58_RE, "SS58 address")]
LeaseId = Annotated[str, Field(max_length=32), _check(_LEASE_ID_RE, "lease id (32 hex chars)")]
EvmAddress = Annotated[str, Field(max_length=42), _check(_EVM_RE, "EVM (H160) address")]
ModelName = Annotated[str, Field(max_length=64), _check(_NAME_RE, "GPU model name")]
IdempotencyKey = Annotated[
    str, Field(max_length=64), _check(_IDEMPOTENCY_RE, "idempotency key (8-64 of A-Za-z0-9_-)")
]
Seconds = Annotated[int, Field(ge=MIN_LEASE_SECONDS, le=MAX_LEASE_SECONDS)]
TemplateName = Annotated[
    str, Field(max_length=48), _check(_TEMPLATE_RE, "template name (a-z0-9._-, at most 48)")
]
SshHost = Annotated[str, Field(max_length=255), _check(_SSH_HOST_RE, "SSH host (a name or an address)")]
SshUser = Annotated[str, Field(max_length=64), _check(_SSH_USER_RE, "SSH user name")]
HostName = Annotated[str, Field(max_length=32), _check(_HOST_RE, "host name")]
ImageRef = Annotated[str, Field(max_length=255), _check(_IMAGE_RE, "container image reference")]
VolumeName = Annotated[
    str, Field(max_length=32), _check(_VOLUME_RE, "volume name (a-z0-9_-, starts with a-z0-9, at most 32)")
]
MIN_VOLUME_GB: Final = 0.1
MAX_VOLUME_GB: Final = 65536.0
VOLUME_MOUNT_PATH: Final = "/workspace"  # where a lease sees its persistent volume


class Value(BaseModel):
    """Base of values nested inside messages: strict and immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_max_length=8400)


class Message(Value):
    """Base of every request and response: a Value that also carries the protocol version."""

    protocol_version: Literal[1] = PROTOCOL_VERSION


class RequestFailed(Exception):
    """Raised by a miner's handler to refuse a request; the transport sends it as ErrorResponse."""

    def __init__(self, code: str, reason: str, status: int = 400) -> None:
        super().__init__(f"{code}: {reason}")
        self.code = code
        self.reason = reason
        self.status = status


class ErrorResponse(Message):
    """Body of every refusal: a machine-readable code and a sentence a person can act on."""

    kind: Literal["error"] = "error"
    code: Annotated[str, PeerText(64)]
    reason: Annotated[str, PeerText(2000)]


# ---------------------------------------------------------------- shared values


class VolumeRequest(Value):
    """A named persistent volume for a lease, mounted at ``/workspace`` (caller -> miner).

    Names are per renter hotkey: the same name from another hotkey is another volume. ``size_gb``
    (GiB) is used when the volume is created; for an existing volume it may be left out, and a
    different size is refused (volumes are not resized)."""

    name: VolumeName
    size_gb: float | None = Field(None, ge=MIN_VOLUME_GB, le=MAX_VOLUME_GB)


class Requirements(Value):
    """What a renter (or a validator's test lease) asks of a machine."""

    gpu_count: int = Field(0, ge=0, le=64)
    gpu_model: ModelName | None = None
    min_gpu_memory_gb: float = Field(0.0, ge=0, le=4096)
    cpu_count: int = Field(1, ge=1, le=1024)
    memory_gb: float = Field(1.0, gt=0, le=16384)
    disk_gb: float = Field(5.0, gt=0, le=1_000_000)
    extra_ports: int = Field(0, ge=0, le=16)
    # The base image to start from (a name from the miner's TemplatesResponse); None: its default.
    # Left off the wire when unset, so miners that predate the field still parse the requirements.
    template: TemplateName | None = Field(None, exclude_if=lambda v: v is None)
    # A persistent volume to attach (created on first use); left off the wire when unset.
    volume: VolumeRequest | None = Field(None, exclude_if=lambda v: v is None)
    # The miner host to run on (a name from MachineSpecs.hosts; validators prove each host alone);
    # None: the miner picks. Left off the wire when unset, like ``template``.
    host: HostName | None = Field(None, exclude_if=lambda v: v is None)
    # End the lease after this many seconds in which the miner measured no activity (no SSH
    # session, CPU, GPU or network use; docs/miner.md "Idle stop"); None: only the term ends it.
    # Off the wire when unset; a miner that predates the field refuses it rather than ignore it.
    idle_stop_s: int | None = Field(
        None, ge=MIN_IDLE_SECONDS, le=MAX_LEASE_SECONDS, exclude_if=lambda v: v is None
    )
    # A cluster member (docs/cluster.md "Docker members"): the lease gets a TUN device, NET_ADMIN in
    # its own network namespace and one published UDP port (``OVERLAY_PORT``) for the renter's
    # WireGuard overlay. Off the wire when False; a miner that predates it refuses it.
    overlay: bool = Field(False, exclude_if=lambda v: not v)


class TemplateInfo(Value):
    """One base image a miner offers for leases (miner -> caller)."""

    name: TemplateName
    image: ImageRef
    version: Annotated[str, PeerText(64)] = ""
    kind: Literal["cuda-pytorch", "cuda", "cpu"]
    description: Annotated[str, PeerText(200)] = ""
    default: bool = False


class GpuSpec(Value):
    index: int = Field(ge=0, le=63)
    name: Annotated[str, PeerText(128)]
    memory_bytes: int = Field(ge=0, le=2**50)
    uuid: Annotated[str, PeerText(128)] | None = None


class HostSpec(Value):
    """One Docker host of a multi-host miner (advisory: the validator proves each host's GPUs)."""

    name: HostName
    up: bool
    reason: Annotated[str, PeerText(300)] = ""
    ssh_host: Annotated[str, PeerText(255)]
    gpus: list[int] = Field(default_factory=list, max_length=64)  # indices into MachineSpecs.gpus
    cpu_cores: int = Field(0, ge=0, le=65536)
    ram_bytes: int = Field(0, ge=0, le=2**60)


class MachineSpecs(Value):
    """What the miner reports about its host. Advisory: validators prove GPUs with PoG."""

    cpu_model: Annotated[str, PeerText(256)]
    cpu_cores: int = Field(ge=0, le=65536)
    cpu_freq_mhz: float = Field(ge=0, le=1e6)
    ram_bytes: int = Field(ge=0, le=2**60)
    disk_total_bytes: int = Field(ge=0, le=2**62)
    disk_free_bytes: int = Field(ge=0, le=2**62)
    disk_write_mbps: float | None = Field(None, ge=0, le=1e7)
    disk_read_mbps: float | None = Field(None, ge=0, le=1e7)
    gpus: list[GpuSpec] = Field(default_factory=list, max_length=64)
    driver_version: Annotated[str, PeerText(64)] | None = None
    cuda_version: Annotated[str, PeerText(64)] | None = None
    docker_available: bool = False
    nvidia_runtime: bool = False
    backend: Annotated[str, PeerText(32)]
    miner_version: Annotated[str, PeerText(32)]
    # A multi-host miner's hosts (--miner.hosts_file); empty (and off the wire) for a single host.
    hosts: list[HostSpec] = Field(default_factory=list, max_length=64, exclude_if=lambda v: not v)
    # How a lease's disk size is held: "kernel" (the storage driver's quota, or a filesystem of the
    # lease's size), "watched" (advisory: a lease over it is stopped at the next measurement),
    # "refused" (it cannot be held: leases are refused). None (off the wire): an older miner.
    disk_cap: Literal["kernel", "watched", "refused"] | None = Field(None, exclude_if=lambda v: v is None)


class SshAccess(Value):
    """How to reach a lease: key-only SSH with a pinned host key."""

    host: SshHost
    port: int = Field(ge=1, le=65535)
    username: SshUser
    host_key: SshPublicKey = Field(description="OpenSSH public host key line to pin")
    ports: dict[int, int] = Field(default_factory=dict, description="lease port -> public port")
    # UDP: the overlay port of a cluster member (``Requirements.overlay``); off the wire when none.
    udp_ports: dict[int, int] = Field(
        default_factory=dict, max_length=4, exclude_if=lambda v: not v, description="lease UDP port -> public"
    )


class LeaseHealth(Value):
    """The miner's watch over a lease: container running and sshd answering (miner -> caller).

    ``lost``: down longer than the miner's threshold, still retried, and reported here and in its
    log rather than dropped. ``restarts`` counts the miner's automatic restarts of this lease.
    """

    status: Literal["up", "down", "lost"]
    checked_at: float = Field(ge=0)
    down_since: float | None = Field(None, ge=0)
    restarts: int = Field(0, ge=0, le=1_000_000)
    reason: Annotated[str, PeerText(500)] = ""


class LeaseIdle(Value):
    """The miner's idle watch over a lease that asked for an idle stop (miner -> caller).

    ``idle_since``: since when every check found the lease idle (None: active at the last check);
    ``seen``: what the last check measured (e.g. ``ssh session``, ``cpu 0.41 cores``, ``idle``);
    ``stopped``: the lease was ended by its idle stop (its state is then ``expired``)."""

    stop_after_s: int = Field(ge=0, le=MAX_LEASE_SECONDS)
    idle_since: float | None = Field(None, ge=0)
    checked_at: float | None = Field(None, ge=0)
    seen: Annotated[str, PeerText(200)] = ""
    stopped: bool = False


class VolumeInfo(Value):
    """One of the caller's persistent volumes on a miner (miner -> caller).

    ``quota``: ``hard`` when the size is a filesystem limit (writes past it fail with ENOSPC),
    ``watch`` when the miner only measures usage and refuses new attaches over it. ``expires_at``:
    when an unattached volume is removed (None while a live lease uses it)."""

    name: VolumeName
    size_gb: float = Field(ge=0, le=MAX_VOLUME_GB)
    used_gb: float | None = Field(None, ge=0)
    quota: Literal["hard", "watch"]
    over_quota: bool = False
    created_at: float = Field(ge=0)
    last_used_at: float = Field(ge=0)
    attached_lease: LeaseId | None = None
    expires_at: float | None = Field(None, ge=0)


class LeaseInfo(Value):
    lease_id: LeaseId
    owner_hotkey: Hotkey
    purpose: Literal["rental", "validation", "beside"]
    state: Literal["active", "expired", "released"]
    requirements: Requirements
    gpus: list[GpuSpec] = Field(default_factory=list, max_length=64)
    ssh: SshAccess | None = None
    created_at: float
    expires_at: float
    # Left off the wire when unknown, so callers that predate the field still parse the lease.
    health: LeaseHealth | None = Field(None, exclude_if=lambda v: v is None)
    # The miner host it runs on (multi-host miners only); off the wire when None.
    host: HostName | None = Field(None, exclude_if=lambda v: v is None)
    # The idle watch, for leases that asked for an idle stop; off the wire otherwise.
    idle: LeaseIdle | None = Field(None, exclude_if=lambda v: v is None)
    # USD per hour at the miner's asking price when it rented the lease (``Price``); off the wire
    # when it names none. Informational: no validator reads it.
    price_per_hour: float | None = Field(
        None, ge=0, le=1e7, allow_inf_nan=False, exclude_if=lambda v: v is None
    )


Money = Annotated[float, Field(ge=0, le=1e6, allow_inf_nan=False)]


class Price(Value):
    """A miner's asking price per hour (miner -> caller), signed with its answer like every answer.

    ``gpu_hour``: per GPU, by the GPU names of its ``MachineSpecs``; ``base_hour``: per lease,
    whatever its GPUs (CPU, memory, disk: a CPU rental's whole price). A lease of N GPUs of one
    model costs ``base_hour + N * gpu_hour[model]`` an hour. Informational: how a renter pays is
    agreed outside the subnet, and no validator's score reads it."""

    currency: Literal["USD"] = "USD"
    base_hour: Money = 0.0
    gpu_hour: dict[Annotated[str, PeerText(128)], Money] = Field(default_factory=dict, max_length=64)


# ---------------------------------------------------------------- requests and responses
# All requests travel validator/operator -> miner; all responses miner -> caller.


class HealthRequest(Message):
    kind: Literal["health"] = "health"


class HealthResponse(Message):
    kind: Literal["health"] = "health"
    version: Annotated[str, PeerText(32)]
    hotkey: Hotkey
    backend: Annotated[str, PeerText(32)]
    uptime_s: float = Field(ge=0)
    active_leases: int = Field(ge=0)
    free_gpus: int = Field(ge=0)


class SpecsRequest(Message):
    kind: Literal["specs"] = "specs"


class SpecsResponse(Message):
    kind: Literal["specs"] = "specs"
    specs: MachineSpecs


class CheckAvailabilityRequest(Message):
    kind: Literal["check_availability"] = "check_availability"
    requirements: Requirements


class AvailabilityResponse(Message):
    kind: Literal["availability"] = "availability"
    available: bool
    reason: Annotated[str, PeerText(2000)] = ""
    free_gpus: int = Field(ge=0)
    max_duration_s: int = Field(ge=0)
    # The asking price (as ``PriceRequest`` answers it), so a renter's one probe sees it; off the
    # wire when the miner names none.
    price: Price | None = Field(None, exclude_if=lambda v: v is None)


class AllocateRequest(Message):
    kind: Literal["allocate"] = "allocate"
    requirements: Requirements
    duration_s: Seconds
    ssh_public_key: SshPublicKey
    # "validation": a validator's proof lease (shares GPUs with other validation leases, never with
    # a rental); "beside": a validator's small presence proof beside the tenants of rented GPUs
    # (shares every GPU, the rented ones first; docs/presence.md)
    purpose: Literal["rental", "validation", "beside"] = "rental"
    # A retry that carries the same key (per caller hotkey) gets the lease the first attempt made.
    # Left off the wire when unset, so miners that predate the field still parse the request.
    idempotency_key: IdempotencyKey | None = Field(None, exclude_if=lambda v: v is None)
    # The renter's EVM address: where collateral slashed for this lease's failure is owed
    # (docs/collateral.md). Signed with the request, so the receipt binds it; left off when unset.
    renter_evm: EvmAddress | None = Field(None, exclude_if=lambda v: v is None)


class TemplatesRequest(Message):
    """The base images the miner offers (validator/operator -> miner)."""

    kind: Literal["templates"] = "templates"


class TemplatesResponse(Message):
    kind: Literal["templates"] = "templates"
    templates: list[TemplateInfo] = Field(default_factory=list, max_length=64)


class LeaseStatusRequest(Message):
    kind: Literal["lease_status"] = "lease_status"
    lease_id: LeaseId


class ExtendLeaseRequest(Message):
    kind: Literal["extend_lease"] = "extend_lease"
    lease_id: LeaseId
    duration_s: Seconds = Field(description="seconds added to the current expiry")


class ExchangeKeyRequest(Message):
    kind: Literal["exchange_key"] = "exchange_key"
    lease_id: LeaseId
    ssh_public_key: SshPublicKey


class RestartLeaseRequest(Message):
    kind: Literal["restart_lease"] = "restart_lease"
    lease_id: LeaseId


class DeallocateRequest(Message):
    kind: Literal["deallocate"] = "deallocate"
    lease_id: LeaseId


class ListLeasesRequest(Message):
    """The caller's own leases (a miner never lists other callers' rentals)."""

    kind: Literal["list_leases"] = "list_leases"


class SignedRequest(Value):
    """A btauth/1-signed request exactly as the miner received it: path, raw body, auth headers.

    Kept by the miner for each rental and shown to validators as a receipt, so that they can
    re-verify the renter's signature themselves (freshness is not checked: the request is old)."""

    path: str = Field(max_length=128)
    body: str = Field(max_length=16384, description="raw request body (UTF-8 JSON) as signed")
    headers: dict[str, str] = Field(max_length=8, description="the X-Bittensor-* headers as received")


class RentalReceipt(Value):
    """One active rental and the renter's signed allocate request that created it."""

    lease_id: LeaseId
    request: SignedRequest
    gpus: list[GpuSpec] = Field(default_factory=list, max_length=64)
    ssh: SshAccess | None = None
    created_at: float
    expires_at: float


class RentalReceiptsRequest(Message):
    """validator -> miner: show the receipts of the rentals you hold (rented credit needs them)."""

    kind: Literal["rental_receipts"] = "rental_receipts"


class RentalReceiptsResponse(Message):
    """miner -> validator: receipts of the miner's active rentals (renters' own signed requests)."""

    kind: Literal["rental_receipts"] = "rental_receipts"
    receipts: list[RentalReceipt] = Field(default_factory=list, max_length=64)


class LeaseEndRequest(Message):
    """validator -> miner: did the renter release this rental itself? (docs/collateral.md)"""

    kind: Literal["lease_end"] = "lease_end"
    lease_id: LeaseId


class LeaseEndResponse(Message):
    """miner -> validator: the renter's own signed deallocate request, when it released the lease.

    ``released`` None: the miner holds no release by the renter (a lease that died inside its
    term is then the miner's failure)."""

    kind: Literal["lease_end"] = "lease_end"
    lease_id: LeaseId
    released: SignedRequest | None = None


class LeaseResponse(Message):
    kind: Literal["lease"] = "lease"
    lease: LeaseInfo


class DeallocateResponse(Message):
    kind: Literal["deallocated"] = "deallocated"
    lease_id: LeaseId


class ListLeasesResponse(Message):
    kind: Literal["leases"] = "leases"
    leases: list[LeaseInfo] = Field(default_factory=list, max_length=1024)


class ListVolumesRequest(Message):
    """The caller's own persistent volumes on this miner (never another hotkey's)."""

    kind: Literal["list_volumes"] = "list_volumes"


class ListVolumesResponse(Message):
    kind: Literal["volumes"] = "volumes"
    volumes: list[VolumeInfo] = Field(default_factory=list, max_length=256)


class DeleteVolumeRequest(Message):
    """Delete one of the caller's volumes and its data now (refused while a lease uses it)."""

    kind: Literal["delete_volume"] = "delete_volume"
    name: VolumeName


class DeleteVolumeResponse(Message):
    kind: Literal["volume_deleted"] = "volume_deleted"
    name: VolumeName


class PriceRequest(Message):
    """The miner's asking price (renter/validator -> miner); a miner that predates it answers 404."""

    kind: Literal["price"] = "price"


class PriceResponse(Message):
    kind: Literal["price"] = "price"
    price: Price | None = None  # None: this miner names no price


MAX_LOG_LINES: Final = 2000


class LeaseLogsRequest(Message):
    """The newest ``tail`` lines of a lease's own logs, where its backend keeps them (owner -> miner)."""

    kind: Literal["lease_logs"] = "lease_logs"
    lease_id: LeaseId
    tail: int = Field(200, ge=1, le=MAX_LOG_LINES)


class LeaseLogsResponse(Message):
    kind: Literal["lease_logs"] = "lease_logs"
    lease_id: LeaseId
    source: Annotated[str, PeerText(80)]  # where they come from, e.g. "docker container logs"
    lines: list[Annotated[str, PeerText(1000)]] = Field(default_factory=list, max_length=MAX_LOG_LINES)


Figure = Annotated[float, Field(ge=0, le=1e9, allow_inf_nan=False)]


class VerdictFigures(Value):
    """What the validator measured this round, each on its own clock (None: not measured)."""

    tflops_fp16: Figure | None = None
    tflops_fp32: Figure | None = None
    memory_gbs: Figure | None = None  # proven bandwidth (median over the GPUs)
    memory_gb: Figure | None = None  # proven resident memory per GPU
    round_trip_ms: Figure | None = None  # validator <-> lease, measured in the session (never subtracted)
    sustained_factor: Figure | None = None
    rented_fraction: Figure | None = None


class VerdictRequest(Message):
    """validator -> miner: its verdict on the miner this round and why (optional: a miner that does
    not know it answers 404 and loses nothing). Signed by the validator like every request; the miner
    keeps it as received so its operator can re-check who said what (``miner-report``)."""

    kind: Literal["verdict"] = "verdict"
    round_id: int = Field(ge=0, le=2**62)
    block: int = Field(ge=0, le=2**62)
    ok: bool
    sample: Figure
    score: Figure | None = None  # the miner's moving-average score after this round
    reasons: list[Annotated[str, PeerText(400)]] = Field(default_factory=list, max_length=16)
    figures: VerdictFigures = Field(default_factory=VerdictFigures)


class VerdictResponse(Message):
    kind: Literal["verdict_received"] = "verdict_received"


Request = (
    HealthRequest
    | SpecsRequest
    | CheckAvailabilityRequest
    | AllocateRequest
    | LeaseStatusRequest
    | ExtendLeaseRequest
    | ExchangeKeyRequest
    | RestartLeaseRequest
    | DeallocateRequest
    | ListLeasesRequest
    | RentalReceiptsRequest
    | LeaseEndRequest
    | TemplatesRequest
    | ListVolumesRequest
    | DeleteVolumeRequest
    | VerdictRequest
    | PriceRequest
    | LeaseLogsRequest
)

ROUTES: dict[type[Message], tuple[str, type[Message]]] = {
    HealthRequest: ("/v1/health", HealthResponse),
    SpecsRequest: ("/v1/specs", SpecsResponse),
    CheckAvailabilityRequest: ("/v1/availability", AvailabilityResponse),
    AllocateRequest: ("/v1/leases/allocate", LeaseResponse),
    LeaseStatusRequest: ("/v1/leases/status", LeaseResponse),
    ExtendLeaseRequest: ("/v1/leases/extend", LeaseResponse),
    ExchangeKeyRequest: ("/v1/leases/exchange-key", LeaseResponse),
    RestartLeaseRequest: ("/v1/leases/restart", LeaseResponse),
    DeallocateRequest: ("/v1/leases/deallocate", DeallocateResponse),
    ListLeasesRequest: ("/v1/leases/list", ListLeasesResponse),
    RentalReceiptsRequest: ("/v1/leases/receipts", RentalReceiptsResponse),
    LeaseEndRequest: ("/v1/leases/end", LeaseEndResponse),
    TemplatesRequest: ("/v1/templates", TemplatesResponse),
    ListVolumesRequest: ("/v1/volumes/list", ListVolumesResponse),
    DeleteVolumeRequest: ("/v1/volumes/delete", DeleteVolumeResponse),
    VerdictRequest: ("/v1/verdict", VerdictResponse),
    PriceRequest: ("/v1/price", PriceResponse),
    LeaseLogsRequest: ("/v1/leases/logs", LeaseLogsResponse),
}


def route_for(request: Message) -> tuple[str, type[Message]]:
    """The path a request is sent to and the model its answer must parse as."""
    try:
        return ROUTES[type(request)]
    except KeyError:
        raise TypeError(f"{type(request).__name__} is not a protocol request") from None


class ErrorCode:
    """Codes carried by ErrorResponse; callers branch on these, people read the reason."""

    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"
    INVALID_REQUEST = "invalid_request"
    TOO_LARGE = "too_large"
    RATE_LIMITED = "rate_limited"
    BUSY = "busy"
    NOT_FOUND = "not_found"
    LEASE_NOT_FOUND = "lease_not_found"
    NOT_OWNER = "not_owner"
    LEASE_EXPIRED = "lease_expired"
    NO_CAPACITY = "no_capacity"
    UNSUPPORTED = "unsupported"
    BACKEND_ERROR = "backend_error"
    INSUFFICIENT_STORAGE = "insufficient_storage"  # HTTP 507: the miner's disk is full
    VOLUME_NOT_FOUND = "volume_not_found"  # the caller has no volume of that name here
    VOLUME_BUSY = "volume_busy"  # a live lease uses the volume (one lease at a time)
    VOLUME_QUOTA = "volume_quota"  # a renter's or the miner's volume cap would be exceeded
    INTERNAL = "internal"


__all__ = [
    "PROTOCOL_VERSION",
    "MAX_LEASE_SECONDS",
    "MIN_IDLE_SECONDS",
    "MIN_LEASE_SECONDS",
    "ROUTES",
    "AllocateRequest",
    "AvailabilityResponse",
    "CheckAvailabilityRequest",
    "DeallocateRequest",
    "DeallocateResponse",
    "DeleteVolumeRequest",
    "DeleteVolumeResponse",
    "ErrorCode",
    "ErrorResponse",
    "ExchangeKeyRequest",
    "ExtendLeaseRequest",
    "GpuSpec",
    "HealthRequest",
    "HealthResponse",
    "ImageRef",
    "LeaseEndRequest",
    "LeaseEndResponse",
    "LeaseHealth",
    "LeaseIdle",
    "LeaseInfo",
    "LeaseLogsRequest",
    "LeaseLogsResponse",
    "LeaseResponse",
    "LeaseStatusRequest",
    "ListLeasesRequest",
    "ListLeasesResponse",
    "ListVolumesRequest",
    "ListVolumesResponse",
    "MAX_LOG_LINES",
    "MachineSpecs",
    "Message",
    "Price",
    "PriceRequest",
    "PriceResponse",
    "Value",
    "Request",
    "RentalReceipt",
    "RentalReceiptsRequest",
    "RentalReceiptsResponse",
    "RequestFailed",
    "Requirements",
    "RestartLeaseRequest",
    "SignedRequest",
    "SpecsRequest",
    "SpecsResponse",
    "SshAccess",
    "TemplateInfo",
    "TemplateName",
    "TemplatesRequest",
    "TemplatesResponse",
    "VOLUME_MOUNT_PATH",
    "VerdictFigures",
    "VerdictRequest",
    "VerdictResponse",
    "VolumeInfo",
    "VolumeName",
    "VolumeRequest",
    "route_for",
]
