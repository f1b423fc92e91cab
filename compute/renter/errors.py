"""The SDK's errors: the operator client's classes under the names a renter reaches for, plus two.

Every error the SDK raises is a ``RenterError`` (``compute.operator.OperatorError``) with a stable
``code`` and a one-sentence ``message`` saying what happened and what to do. Branch on the classes:

- ``ConfigError``: fix something locally (wallet, key file, a bad argument);
- ``NoMachineAvailable``: nothing matched, or every match refused;
- ``MinerUnavailable``: the miner did not answer, or not with its own signature;
- ``LeaseUnavailable``: the lease is unknown, not yours, or ended;
- ``SshError`` and its subclasses: reaching into the lease failed (``HostKeyMismatch`` means the
  endpoint did not present the host key the miner signed: nothing was sent; ``TransferStalled`` means
  a copy moved almost nothing for its idle timeout);
- ``OutputTruncated``: ``run`` captured a command that printed more than ``max_output`` (``.result``
  holds the kept part);
- ``CommandFailed``: ``run(..., check=True)`` and the command exited non-zero (``.result``);
- ``ReleaseFailed``: a release could not be confirmed; the lease still ends at its term.
"""

from __future__ import annotations

from compute.operator import (
    CommandTimeout,
    HostKeyMismatch,
    KeyFileError,
    LeaseExpired,
    LeaseNotFound,
    LeaseNotReady,
    MinerIdentityError,
    MinerOffline,
    NoMatchingMachine,
    NotOwner,
    OperatorError,
    OutputTruncated,
    Refused,
    RunResult,
    SshAuthFailed,
    SshError,
    SshUnreachable,
    TransferFailed,
    TransferStalled,
    UsageError,
)

RenterError = OperatorError
ConfigError = UsageError
NoMachineAvailable = NoMatchingMachine
MinerUnavailable = MinerOffline
LeaseUnavailable = (LeaseNotFound, NotOwner, LeaseExpired, LeaseNotReady)


class CommandFailed(OperatorError):
    """A command run with ``check=True`` exited non-zero; ``result`` holds its status and output."""

    code = "command_failed"

    def __init__(self, result: RunResult, lease_id: str) -> None:
        tail = (result.stderr or result.stdout).strip()[-500:]
        super().__init__(
            f"lease {lease_id}: {result.command!r} exited {result.exit_status}"
            + (f": {tail}" if tail else "")
        )
        self.result = result


class ReleaseFailed(Refused):
    """The miner did not confirm the release; the lease still ends by itself at its term."""

    code = "release_failed"


__all__ = [
    "CommandFailed",
    "CommandTimeout",
    "ConfigError",
    "HostKeyMismatch",
    "KeyFileError",
    "LeaseExpired",
    "LeaseNotFound",
    "LeaseNotReady",
    "LeaseUnavailable",
    "MinerIdentityError",
    "MinerUnavailable",
    "NoMachineAvailable",
    "NotOwner",
    "OutputTruncated",
    "ReleaseFailed",
    "RenterError",
    "SshAuthFailed",
    "SshError",
    "SshUnreachable",
    "TransferFailed",
    "TransferStalled",
]
