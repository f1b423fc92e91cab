"""What people read about the collateral contract: TAO amounts, times, and a hint for each revert.

``tao(wei)`` writes an amount as TAO (exact, no float rounding); ``explain(error)`` turns a
:class:`ContractReverted` into one line saying what the contract refused, its arguments in TAO and
UTC, and one line saying what to do (``HINTS``: one per custom error of ``contracts/Collateral.sol``;
a test holds the table to the compiled ABI, so a new error without a hint fails).

What it deliberately does not do: print, or decide anything (the CLIs print; the chain decides).
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

from compute.collateral.errors import ContractReverted

WEI_PER_TAO = 10**18

ASSOCIATE = "python -m compute collateral associate"
STATUS = "python -m compute collateral status"
RECLAIM = "python -m compute collateral reclaim"

HINTS: dict[str, str] = {
    "BadConfig": "the contract's constructor refused this setting: fix it in the deployment",
    "BadAmount": "the amount must be above 0, a whole number of rao and, for a reclaim, at most the "
    f"deposit (`{STATUS}` shows it)",
    "BelowMinimum": "a deposit must reach the contract's minimum: deposit at least that much",
    "NotAssociated": f"this EVM key is not associated with a hotkey of the subnet: run `{ASSOCIATE}` "
    "with the same wallet and EVM key, then retry",
    "NotOwner": "the deposit belongs to another EVM address: sign with the key that made it "
    f"(--collateral.evm_key or COLLATERAL_EVM_KEY; `{STATUS}` shows its owner)",
    "NotValidator": "only an EVM key associated with a hotkey holding a validator permit may attest: "
    f"run `{ASSOCIATE}` with the validator's wallet",
    "BadKind": "the slash proposal names an unknown kind (0: failed rental, 1: cheat): a validator bug, "
    "report it",
    "BadRenter": "a failed-rental slash needs the renter's EVM address (a cheat slash none): a validator "
    "bug, report it",
    "BadGpus": "a slash names between 1 and 64 proven GPUs: a validator bug, report it",
    "BadIncident": "the slash proposal names no incident: a validator bug, report it",
    "IncidentUsed": "this incident was already slashed once: nothing more to do",
    "NothingToSlash": "the miner's deposit is empty: there is nothing to slash",
    "BondRequired": "opening a slash proposal carries the open bond: fund the validator's EVM key",
    "AlreadyAttested": "this validator already attested this proposal: nothing more to do",
    "ProposalClosed": "the proposal already executed or expired (a peer's attestation may have executed "
    "it): nothing more to do",
    "ProposalNotExpired": "the proposal is still open: it can be expired only after its time to live",
    "TooManyAttesters": "the proposal holds its 256 attesters: wait for it to execute or expire",
    "NoQuorum": "the attested stake is below the quorum: wait for more validators to attest",
    "ReclaimPending": f"a reclaim is already pending: finish it (`{RECLAIM} --collateral.finalize`) or "
    f"cancel it (`{RECLAIM} --collateral.cancel`) first",
    "NoReclaim": f"no reclaim is pending: ask one with `{RECLAIM} --collateral.amount TAO`",
    "ReclaimTooEarly": f"the reclaim delay has not passed: run `{RECLAIM} --collateral.finalize` "
    "again after the time shown",
    "SlashPending": "slash proposals are open against this deposit: the reclaim waits until they "
    "execute or expire (the time shown)",
    "NothingOwed": "the contract owes nothing to this EVM address: compensation is owed once validators "
    "slashed the miner of a lease you reported (`register.py report LEASE`)",
    "TransferFailed": "the contract could not pay this address (a contract refusing TAO?): claim with an "
    "ordinary EVM key",
    "Reentrancy": "a payment tried to call back into the contract: refused",
    "DirectPayment": "the contract takes TAO only through a deposit or an attestation: use "
    "`python -m compute collateral deposit`, not a plain transfer",
    "reverted": "the call reverted without a named error: check --collateral.address (the Collateral "
    "contract) and --collateral.rpc (the chain it is on)",
}

# How each error's arguments read (by position): amounts in TAO, timestamps in UTC.
_ARGS: dict[str, tuple[str, ...]] = {
    "BelowMinimum": ("minimum {tao}",),
    "BondRequired": ("bond {tao}",),
    "NoQuorum": ("attested stake {tao}", "of {tao}"),
    "ReclaimTooEarly": ("payable from {time}",),
    "SlashPending": ("{int} open proposal(s)", "blocking until {time}"),
    "BadConfig": ("{str}",),
}


def tao(wei: int) -> str:
    """``wei`` as TAO, exactly, with its unit: ``2.5 TAO``, ``0.000000001 TAO``."""
    text = format(Decimal(wei) / WEI_PER_TAO, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return f"{text} TAO"


def utc(timestamp: int) -> str:
    """A chain timestamp (seconds) as a UTC time people read."""
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _arg(template: str, value: object) -> str:
    if "{tao}" in template and isinstance(value, int):
        return template.format(tao=tao(value))
    if "{time}" in template and isinstance(value, int):
        return template.format(time=utc(value))
    return template.format(int=value, str=value)


def explain(error: ContractReverted) -> tuple[str, str]:
    """(what the contract refused, what to do): two lines, amounts in TAO, times in UTC."""
    templates = _ARGS.get(error.error, ())
    parts = [_arg(t, v) for t, v in zip(templates, error.args_, strict=False)]
    parts += [str(v) for v in error.args_[len(templates) :]]
    what = f"contract reverted: {error.error}" + (f" ({', '.join(parts)})" if parts else "")
    if error.error == "reverted" and error.detail:
        what += f" - {error.detail}"
    return what, HINTS.get(error.error, HINTS["reverted"])


__all__ = ["HINTS", "WEI_PER_TAO", "explain", "tao", "utc"]
