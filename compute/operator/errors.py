"""Errors of the operator client, each mapped to a CLI exit code.

``OperatorError`` is the root. ``Refused`` (exit 1) covers everything where the request was
well-formed but the answer is no: no matching machine, a miner that is offline or refuses, a lease
that is not ours, expired, or unknown. ``UsageError`` (exit 2) covers what the operator must fix
locally: a bad flag value, an unreadable key file, a missing wallet.

This module only defines the classes and the mapping from transport refusals; it does no I/O.
"""

from __future__ import annotations

from compute.protocol import ErrorCode

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2


class OperatorError(Exception):
    """Root of the operator client's errors; ``code`` is stable and machine-readable."""

    code = "error"
    exit_code = EXIT_REFUSED

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UsageError(OperatorError):
    """Bad input the operator must fix locally (flags, key files, wallet)."""

    code = "usage"
    exit_code = EXIT_USAGE


class KeyFileError(UsageError):
    """An SSH key file is missing, unreadable or not a valid OpenSSH key."""

    code = "bad_key_file"


class Refused(OperatorError):
    """The operation was understood but cannot be done."""

    code = "refused"


class NoMatchingMachine(Refused):
    code = "no_matching_machine"


class MinerOffline(Refused):
    """The miner did not answer (timeout, connection refused, not serving an axon)."""

    code = "miner_offline"


class MinerIdentityError(Refused):
    """The answer was not signed by the hotkey we meant to reach (or was malformed)."""

    code = "bad_signature"


class LeaseNotFound(Refused):
    code = "lease_not_found"


class NotOwner(Refused):
    code = "not_owner"


class LeaseExpired(Refused):
    code = "lease_expired"


class MinerRefused(Refused):
    """Any other refusal by a miner; ``miner_code`` is the miner's ErrorResponse code."""

    code = "miner_refused"

    def __init__(self, message: str, miner_code: str = "") -> None:
        super().__init__(message)
        self.miner_code = miner_code


class VolumeNotFound(Refused):
    code = "volume_not_found"


class VolumeBusy(Refused):
    """The volume is attached to a live lease (one at a time; end that lease first)."""

    code = "volume_busy"


class VolumeQuota(Refused):
    """A volume cap of the miner (per renter or in all) would be exceeded."""

    code = "volume_quota"


class SshError(Refused):
    """Root of failures reaching into a lease over SSH (``register.py ssh|exec|cp``, the SDK)."""

    code = "ssh_failed"


class LeaseNotReady(SshError):
    """The lease is not active, or the book has no pinned SSH access for it."""

    code = "lease_not_ready"


class SshUnreachable(SshError):
    """The lease's SSH endpoint did not answer (or the connection broke)."""

    code = "ssh_unreachable"


class HostKeyMismatch(SshError):
    """The endpoint presented another host key than the one the miner signed: never connected."""

    code = "host_key_mismatch"


class SshAuthFailed(SshError):
    """The lease refused our key (e.g. it was exchanged since)."""

    code = "ssh_auth_failed"


class CommandTimeout(SshError):
    code = "command_timeout"


class OutputTruncated(SshError):
    """A command printed more than the capture cap; ``result`` (when set) holds what was kept."""

    code = "output_truncated"

    def __init__(self, message: str, result: object = None) -> None:
        super().__init__(message)
        self.result = result


class TransferFailed(SshError):
    """A copy to or from the lease failed (missing file, no space, permission)."""

    code = "transfer_failed"


class TransferStalled(TransferFailed):
    """A copy moved (almost) nothing for its idle timeout: the lease's SFTP stopped answering."""

    code = "transfer_stalled"


_BY_MINER_CODE: dict[str, type[Refused]] = {
    ErrorCode.NOT_OWNER: NotOwner,
    ErrorCode.LEASE_EXPIRED: LeaseExpired,
    ErrorCode.LEASE_NOT_FOUND: LeaseNotFound,
    ErrorCode.NO_CAPACITY: NoMatchingMachine,
    ErrorCode.VOLUME_NOT_FOUND: VolumeNotFound,
    ErrorCode.VOLUME_BUSY: VolumeBusy,
    ErrorCode.VOLUME_QUOTA: VolumeQuota,
}


def from_rejection(code: str, reason: str, hotkey: str) -> Refused:
    """The precise error for a miner's ``Rejected(status, code, reason)``."""
    cls = _BY_MINER_CODE.get(code)
    prefix = f"miner {hotkey[:10]}… refused"
    if cls is NotOwner:
        return NotOwner(f"{prefix}: this lease belongs to another hotkey ({reason})")
    if cls is not None:
        return cls(f"{prefix}: {reason}")
    return MinerRefused(f"{prefix} ({code}): {reason}", miner_code=code)
