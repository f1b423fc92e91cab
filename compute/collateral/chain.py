"""web3.py client of the deployed Collateral contract: typed reads, signed writes, decoded events.

Every write is signed locally with the caller's EVM key (``eth_account``) and sent raw, so the
same code talks to subtensor's EVM RPC, to a local node, and to the in-process test chain. A
revert comes back as :class:`ContractReverted` naming the contract's custom error; results are
:class:`TxResult` with the gas used and the contract's decoded events.

Sync by design (web3's HTTP provider is sync); async callers use ``asyncio.to_thread``.
What it deliberately does not do: decide whether to slash (``compute.collateral.evidence`` and
the validator do), or hold keys (``compute.collateral.keys``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from eth_abi.exceptions import DecodingError
from eth_account.signers.local import LocalAccount
from eth_tester.exceptions import TransactionFailed
from eth_utils import keccak
from web3 import Web3
from web3.exceptions import (
    ContractCustomError,
    ContractLogicError,
    TimeExhausted,
    Web3Exception,
    Web3RPCError,
)

from compute.collateral.artifact import compiled
from compute.collateral.errors import ChainUnavailable, CollateralError, ContractReverted
from compute.collateral.identity import checked_h160, hotkey_bytes32
from compute.peertext import printable
from compute.safejson import PARSE_ERRORS

logger = logging.getLogger(__name__)
KIND_FAILED_RENTAL = 0
KIND_CHEAT = 1
ZERO_ADDRESS = "0x" + "00" * 20


@dataclass(frozen=True)
class Event:
    name: str
    args: dict[str, Any]


@dataclass(frozen=True)
class TxResult:
    tx_hash: str
    gas_used: int
    events: tuple[Event, ...] = ()
    fee_wei: int = 0  # gas used x effective gas price: what the sender paid

    def event(self, name: str) -> Event | None:
        return next((e for e in self.events if e.name == name), None)


@dataclass(frozen=True)
class CollateralConfig:
    """The contract's constructor arguments (immutable once deployed)."""

    rate_per_gpu_day: int  # wei
    min_deposit: int  # wei
    reclaim_delay_s: int
    proposal_ttl_s: int
    kappa_bps: int = 5000
    renter_share_bps: int = 10_000
    remainder_to: str = ZERO_ADDRESS  # zero: burned (locked in the contract forever)
    open_bond: int = 0  # wei an opener stakes on its proposal; 0: a tenth of the rate

    @property
    def bond(self) -> int:
        return self.open_bond or self.rate_per_gpu_day // 10


@dataclass(frozen=True)
class DepositState:
    owner: str
    amount: int
    pending_reclaim: int
    reclaim_at: int
    open_proposals: int
    slashes: int
    blocked_until: int = 0  # the latest expiry of a proposal opened against it

    @property
    def exists(self) -> bool:
        return self.owner != ZERO_ADDRESS

    @property
    def standing(self) -> int:
        """What stays at stake for sure: the amount less a pending reclaim."""
        return self.amount - self.pending_reclaim


@dataclass(frozen=True)
class SlashProposal:
    """What validators attest. (hotkey, kind, incident, renter, gpus) make the proposal id on chain:
    every evidence of one incident counts toward one proposal; ``evidence_hash`` names the document
    this attester checked (kept in its ``Attested`` event)."""

    hotkey: str  # miner hotkey, ss58: its deposit
    kind: int  # KIND_FAILED_RENTAL or KIND_CHEAT
    incident: bytes  # 32 bytes, evidence.incident_of: what happened, whatever document shows it
    evidence_hash: bytes  # 32 bytes, evidence.evidence_hash
    gpus: int  # GPUs the slash is sized by
    renter: str = ZERO_ADDRESS  # the failed lease's renter (its EVM address); zero for a cheat

    def key(self) -> tuple[Any, ...]:
        return (
            hotkey_bytes32(self.hotkey),
            self.kind,
            self.incident,
            Web3.to_checksum_address(checked_h160(self.renter)),
            self.gpus,
        )

    def args(self) -> tuple[Any, ...]:
        hotkey, kind, incident, renter, gpus = self.key()
        return (hotkey, kind, incident, self.evidence_hash, renter, gpus)

    def proposal_id(self) -> bytes:
        from eth_abi import encode

        return keccak(encode(["bytes32", "uint8", "bytes32", "address", "uint16"], list(self.key())))


@dataclass(frozen=True)
class ProposalState:
    hotkey: bytes
    renter: str
    expires_at: int
    gpus: int
    kind: int
    state: str  # none | open | executed | expired
    attesters: int
    opener: str = ZERO_ADDRESS
    openings: int = 0


_STATES = ("none", "open", "executed", "expired")
# what web3 raises on a well-formed JSON-RPC answer that answers nothing asked (an endpoint's word)
_UNREADABLE = (Web3Exception, DecodingError, *PARSE_ERRORS)


def _error_table(abi: list[dict[str, Any]]) -> dict[bytes, tuple[str, list[str]]]:
    table = {}
    for item in abi:
        if item.get("type") == "error":
            types = [i["type"] for i in item.get("inputs", [])]
            table[keccak(f"{item['name']}({','.join(types)})".encode())[:4]] = (item["name"], types)
    return table


@dataclass
class CollateralClient:
    """One deployed contract at ``address``; ``account`` signs writes (None: read-only)."""

    w3: Web3
    address: str
    account: LocalAccount | None = None
    gas_margin: float = 1.25
    timeout_s: float = 120.0
    _errors: dict[bytes, tuple[str, list[str]]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        unit = compiled("Collateral")
        self.address = Web3.to_checksum_address(checked_h160(self.address))
        self.contract = self.w3.eth.contract(address=self.address, abi=unit.abi)
        self._errors = _error_table(unit.abi)

    # ---------------------------------------------------------------- reads

    @property
    def where(self) -> str:
        """The endpoint as errors name it (``compute.collateral.rpc``: scheme://host:port)."""
        return f"EVM RPC {getattr(self.w3.provider, 'endpoint', '')}".strip()

    def _call(self, name: str, *args: Any) -> Any:
        sender = self.account.address if self.account else Web3.to_checksum_address(ZERO_ADDRESS)
        function = getattr(self.contract.functions, name)(*args)
        try:
            return function.call({"from": sender})
        except (ContractCustomError, ContractLogicError, TransactionFailed) as error:
            raise self._reverted(error) from None
        except (OSError, Web3RPCError) as error:
            raise ChainUnavailable(f"{self.where} did not answer {name}: {printable(error, 300)}") from None
        except _UNREADABLE as error:
            raise self._unreadable(name, error) from None

    def _unreadable(self, name: str, error: BaseException) -> ChainUnavailable:
        return ChainUnavailable(f"{self.where}: no readable answer to {name} ({printable(error, 200)})")

    def config(self) -> CollateralConfig:
        return CollateralConfig(
            rate_per_gpu_day=self._call("ratePerGpuDay"),
            min_deposit=self._call("minDeposit"),
            reclaim_delay_s=self._call("reclaimDelay"),
            proposal_ttl_s=self._call("proposalTtl"),
            kappa_bps=self._call("kappaBps"),
            renter_share_bps=self._call("renterShareBps"),
            remainder_to=self._call("remainderTo").lower(),
            open_bond=self._call("openBond"),
        )

    def reclaim_delay(self) -> int:
        """Seconds a reclaim waits (one read; ``config`` reads all eight values)."""
        return int(self._call("reclaimDelay"))

    def required(self, gpus: int) -> int:
        return int(self._call("required", gpus))

    def deposit_of(self, hotkey: str) -> DepositState:
        owner, reclaim_at, open_proposals, blocked_until, slashes, amount, pending = self._call(
            "depositOf", hotkey_bytes32(hotkey)
        )
        return DepositState(
            owner.lower(), amount, pending, reclaim_at, open_proposals, slashes, blocked_until
        )

    def next_slash_amount(self, hotkey: str, gpus: int) -> int:
        return int(self._call("nextSlashAmount", hotkey_bytes32(hotkey), gpus))

    def owed(self, address: str) -> int:
        return int(self._call("owed", Web3.to_checksum_address(checked_h160(address))))

    def burned(self) -> int:
        return int(self._call("burned"))

    def incident_used(self, hotkey: str, incident: bytes) -> bool:
        key = self._call("incidentKey", hotkey_bytes32(hotkey), incident)
        return bool(self._call("incidentUsed", key))

    def proposal(self, proposal: SlashProposal) -> ProposalState:
        hotkey, renter, expires_at, gpus, kind, state, attesters, opener, openings = self._call(
            "proposalOf", proposal.proposal_id()
        )
        return ProposalState(
            hotkey,
            renter.lower(),
            expires_at,
            gpus,
            kind,
            _STATES[state],
            attesters,
            opener.lower(),
            openings,
        )

    def attested_in(self, proposal: SlashProposal, validator_hotkey: str) -> int:
        """The opening of ``proposal`` that ``validator_hotkey`` last attested (0: never)."""
        return int(self._call("attestedIn", proposal.proposal_id(), hotkey_bytes32(validator_hotkey)))

    def open_bond(self) -> int:
        return int(self._call("openBond"))

    def chain_time(self) -> int:
        """The latest block's timestamp: the contract's clock."""
        try:
            return int(self.w3.eth.get_block("latest")["timestamp"])
        except (OSError, Web3RPCError) as error:
            raise ChainUnavailable(
                f"{self.where} did not answer the latest block: {printable(error, 300)}"
            ) from None
        except _UNREADABLE as error:
            raise self._unreadable("the latest block", error) from None

    def tally(self, proposal: SlashProposal) -> tuple[int, int]:
        attested, total = self._call("tally", proposal.proposal_id())
        return int(attested), int(total)

    # ---------------------------------------------------------------- writes

    def deposit(self, wei: int) -> TxResult:
        """Deposit, or top up, the collateral of the sender's associated hotkey."""
        return self._send("deposit", value=wei)

    def request_reclaim(self, hotkey: str, wei: int) -> TxResult:
        return self._send("requestReclaim", hotkey_bytes32(hotkey), wei)

    def cancel_reclaim(self, hotkey: str) -> TxResult:
        return self._send("cancelReclaim", hotkey_bytes32(hotkey))

    def finalize_reclaim(self, hotkey: str) -> TxResult:
        return self._send("finalizeReclaim", hotkey_bytes32(hotkey))

    def attest(self, proposal: SlashProposal) -> TxResult:
        """Attest ``proposal``; when this attestation opens it (new, or its last opening expired),
        the bond goes with it. A race at the boundary is retried once with the other value."""
        state = self.proposal(proposal)
        now = self.chain_time()
        opening = state.state in ("none", "expired") or (state.state == "open" and now > state.expires_at)
        bond = self.open_bond()
        try:
            return self._send("attest", *proposal.args(), value=bond if opening else 0)
        except ContractReverted as error:
            if error.error not in ("BondRequired", "BadAmount"):
                raise
        return self._send("attest", *proposal.args(), value=0 if opening else bond)

    def execute(self, proposal: SlashProposal) -> TxResult:
        return self._send("execute", *proposal.key())

    def expire(self, proposal: SlashProposal) -> TxResult:
        return self._send("expire", proposal.proposal_id())

    def claim(self) -> TxResult:
        """Pay the sender's own compensation (or remainder) to the sender."""
        return self._send("claim")

    def _send(self, name: str, *args: Any, value: int = 0) -> TxResult:
        if self.account is None:
            raise CollateralError(f"{name} needs an EVM key (this client is read-only)")
        function = getattr(self.contract.functions, name)(*args)
        sender = self.account.address
        try:
            gas = function.estimate_gas({"from": sender, "value": value})
            tx = function.build_transaction(
                {
                    "from": sender,
                    "value": value,
                    "gas": int(gas * self.gas_margin) + 10_000,
                    "nonce": self.w3.eth.get_transaction_count(sender, "pending"),
                    "chainId": self.w3.eth.chain_id,
                }
            )
            signed = self.account.sign_transaction(tx)
            tx_hash = self.w3.eth.send_raw_transaction(signed.raw_transaction)
            receipt = self.w3.eth.wait_for_transaction_receipt(tx_hash, timeout=self.timeout_s)
        except (ContractCustomError, ContractLogicError, TransactionFailed) as error:
            raise self._reverted(error) from None
        except TimeExhausted as error:
            raise ChainUnavailable(f"{name}: no receipt within {self.timeout_s:.0f} s") from error
        except (OSError, Web3RPCError) as error:
            raise ChainUnavailable(f"{self.where} refused {name}: {printable(error, 300)}") from None
        except _UNREADABLE as error:
            raise self._unreadable(name, error) from None
        try:
            status = int(receipt["status"])
        except _UNREADABLE as error:
            raise self._unreadable(f"the receipt of {name}", error) from None
        if status != 1:
            raise self._failed_on_chain(name, function, sender, value, bytes(tx_hash).hex())
        try:
            fee = int(receipt["gasUsed"]) * int(receipt.get("effectiveGasPrice") or tx.get("gasPrice") or 0)
            result = TxResult(
                "0x" + bytes(tx_hash).hex(), int(receipt["gasUsed"]), self._events(receipt), fee
            )
        except _UNREADABLE as error:
            raise self._unreadable(f"the receipt of {name}", error) from None
        logger.info(
            "collateral %s tx=%s gas=%d events=%s",
            name,
            result.tx_hash,
            result.gas_used,
            [e.name for e in result.events],
        )
        return result

    def _failed_on_chain(
        self, name: str, function: Any, sender: str, value: int, tx_hash: str
    ) -> ContractReverted:
        """A transaction mined but failed: the contract's error, as the same transaction estimated on
        the state now names it. Another party's transaction landed between the estimate and the mining
        (a peer's attestation executed the slash first: ``ProposalClosed``, not a bare revert)."""
        try:
            function.estimate_gas({"from": sender, "value": value})
        except (ContractCustomError, ContractLogicError, TransactionFailed) as error:
            named = self._reverted(error)
            if named.error != "reverted":
                return ContractReverted(
                    named.error, named.args_, detail=f"{name} tx {tx_hash} failed on chain"
                )
        except (ChainUnavailable, OSError, *_UNREADABLE):
            pass  # no better name to be had: the plain failure
        return ContractReverted("reverted", detail=f"{name} tx {tx_hash} failed on chain")

    def _events(self, receipt: Any) -> tuple[Event, ...]:
        out = []
        for log in receipt["logs"]:
            if Web3.to_checksum_address(log["address"]) != self.address:
                continue
            events: Any = self.contract.events
            for event in events:
                try:
                    decoded = event().process_log(log)
                except Exception:  # noqa: BLE001 - a log of another event type
                    continue
                out.append(Event(decoded["event"], dict(decoded["args"])))
                break
        return tuple(out)

    def _reverted(self, error: Exception) -> ContractReverted:
        payload = revert_bytes(error)
        known = self._errors.get(payload[:4]) if payload else None
        if payload is not None and known is not None:
            from eth_abi import decode

            name, types = known
            values = tuple(decode(types, payload[4:])) if types else ()
            return ContractReverted(name, values)
        return ContractReverted("reverted", detail=printable(error, 300))


def revert_bytes(error: BaseException) -> bytes | None:
    """The revert data carried by a web3 or eth-tester error (or an error it was raised from)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        data = getattr(current, "data", None)
        if isinstance(data, dict):
            data = data.get("data")
        if isinstance(data, str) and data.startswith("0x") and len(data) >= 10:
            return bytes.fromhex(data[2:])
        for arg in getattr(current, "args", ()):
            if isinstance(arg, (bytes, bytearray)) and len(arg) >= 4:
                return bytes(arg)
        current = current.__cause__ or current.__context__
    return None
