"""Errors of the collateral package: one root, precise subclasses a caller can branch on."""

from __future__ import annotations


class CollateralError(Exception):
    """Root of every collateral error."""


class BuildError(CollateralError):
    """The contracts could not be compiled, or the artifact is missing or unreadable."""


class EvmKeyError(CollateralError):
    """An EVM key or an address is missing or malformed (the message says which)."""


class ChainUnavailable(CollateralError):
    """The EVM RPC endpoint did not answer."""


class ContractReverted(CollateralError):
    """A call or transaction reverted; ``error`` is the contract's custom error name."""

    def __init__(self, error: str, args: tuple[object, ...] = (), detail: str = "") -> None:
        self.error = error
        self.args_ = args
        self.detail = detail
        text = f"{error}{args if args else ''}"
        super().__init__(f"contract reverted: {text}{' - ' + detail if detail else ''}")


class EvidenceError(CollateralError):
    """Evidence is malformed, does not verify, or does not match its hash."""
