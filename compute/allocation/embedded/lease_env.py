"""Checks on the operator's shaping of a lease environment (embedded backend's constructor).

Pure values and validation, no I/O: which variables the backend sets for every lease and may not
be overridden (``RESERVED_ENV``), the default ``PATH`` tail, and the checks that turn the
operator's ``path_prefix`` / ``extra_env`` into safe values or raise ``ValueError``. Nothing here
ever takes renter or validator data.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

DEFAULT_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
# Set by the backend for every lease; extra_env may not replace them (PATH: use path_prefix).
RESERVED_ENV = frozenset(
    {
        "PATH",
        "HOME",
        "PWD",
        "USER",
        "LOGNAME",
        "SHELL",
        "LEASE_ID",
        "CUDA_VISIBLE_DEVICES",
        "NVIDIA_VISIBLE_DEVICES",
    }
)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_path_prefix(entries: Sequence[str | os.PathLike[str]]) -> tuple[str, ...]:
    """The entries as strings; each must be an absolute path without ``:`` or NUL."""
    checked: list[str] = []
    for entry in entries:
        text = os.fspath(entry)
        if not isinstance(text, str) or not os.path.isabs(text) or ":" in text or "\0" in text:
            raise ValueError(f"path_prefix entries must be absolute paths without ':' or NUL: {text!r}")
        checked.append(text)
    return tuple(checked)


def check_extra_env(extra_env: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``extra_env``; names must be valid and not reserved, values strings without NUL."""
    checked: dict[str, str] = {}
    for name, value in extra_env.items():
        if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
            raise ValueError(f"extra_env: {name!r} is not a valid variable name")
        if name in RESERVED_ENV:
            raise ValueError(
                f"extra_env: {name} is set by the backend for each lease and cannot be overridden"
            )
        if not isinstance(value, str) or "\0" in value:
            raise ValueError(f"extra_env: the value of {name} must be a string without NUL")
        checked[name] = value
    return checked
