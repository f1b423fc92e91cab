"""The operator's allocation client (``neurons/register.py``): find, rent and manage machines.

Facade of the package: ``main`` is the command line; ``Operator`` the lease operations behind it
(usable from a marketplace backend without the CLI); ``LeaseBook`` the local SQLite lease list;
``discover``/``rank`` machine discovery and choice; key and known_hosts helpers; the error classes.
"""

from __future__ import annotations

from compute.operator.book import BookEntry, BookError, LeaseBook
from compute.operator.cli import build_parser, main, metagraph_reader
from compute.operator.discovery import (
    Machine,
    VerifiedGpus,
    Wanted,
    discover,
    matches,
    model_matches,
    probe,
    rank,
)
from compute.operator.errors import (
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_USAGE,
    CommandTimeout,
    HostKeyMismatch,
    KeyFileError,
    LeaseExpired,
    LeaseNotFound,
    LeaseNotReady,
    MinerIdentityError,
    MinerOffline,
    MinerRefused,
    NoMatchingMachine,
    NotOwner,
    OperatorError,
    OutputTruncated,
    Refused,
    SshAuthFailed,
    SshError,
    SshUnreachable,
    TransferFailed,
    TransferStalled,
    UsageError,
)
from compute.operator.keys import (
    RenterKey,
    generate_keypair,
    known_hosts_line,
    load_public_key,
    remove_generated_key,
    ssh_command,
    write_known_hosts,
)
from compute.operator.pog_records import load_verified
from compute.operator.rpc import Client, MinerRef
from compute.operator.service import Allocation, Operator
from compute.operator.shell import (
    LeaseAccess,
    LeaseShell,
    RunResult,
    TransferLimits,
    ssh_argv,
    wait_for_ssh,
)
from compute.operator.templates import MinerTemplates, offered_templates

__all__ = [
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_USAGE",
    "Allocation",
    "BookEntry",
    "BookError",
    "CommandTimeout",
    "HostKeyMismatch",
    "Client",
    "KeyFileError",
    "LeaseAccess",
    "LeaseShell",
    "LeaseBook",
    "LeaseExpired",
    "LeaseNotFound",
    "LeaseNotReady",
    "Machine",
    "MinerIdentityError",
    "MinerOffline",
    "MinerRef",
    "MinerRefused",
    "MinerTemplates",
    "NoMatchingMachine",
    "NotOwner",
    "Operator",
    "OperatorError",
    "OutputTruncated",
    "Refused",
    "SshAuthFailed",
    "SshError",
    "SshUnreachable",
    "TransferFailed",
    "TransferStalled",
    "TransferLimits",
    "RenterKey",
    "RunResult",
    "UsageError",
    "VerifiedGpus",
    "Wanted",
    "build_parser",
    "discover",
    "generate_keypair",
    "known_hosts_line",
    "load_public_key",
    "load_verified",
    "main",
    "matches",
    "metagraph_reader",
    "model_matches",
    "offered_templates",
    "probe",
    "rank",
    "ssh_argv",
    "remove_generated_key",
    "ssh_command",
    "wait_for_ssh",
    "write_known_hosts",
]
