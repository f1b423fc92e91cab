"""Keys and response signatures for the signed transport.

What it does:
- ``KeyWallet``: a wallet-shaped object over an already-loaded hotkey ``Keypair``, so that
  ``bittensor.http_auth.sign`` costs ~0.1 ms instead of reloading the key file on every call.
- ``load_wallet``: opens a ``bt.Wallet`` and fails fast with a :class:`WalletError` naming the
  missing file, instead of a bare ``FileNotFoundError`` deep inside the first request.
- Response signatures (``compute-resp/1``): btauth/1 only authenticates requests, so the server
  signs ``b"compute-resp/1|" + request_nonce + b"|" + sha256(body).hexdigest()`` with its hotkey
  and the client checks it against the hotkey it meant to reach.

- ``verify_kept_request``: the signer of a btauth/1 request kept as a record (a rental receipt),
  checked long after it was sent: the signature only, never freshness or replay.

What it deliberately does not do: live request signing/verification (that is
``bittensor.http_auth``, used unchanged), key creation, or password prompts.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import Any

import bittensor as bt
from bittensor import http_auth
from bittensor.sp_core import Keypair
from bittensor.sp_core import verify as _sp_verify

logger = logging.getLogger(__name__)

RESPONSE_SCHEME = b"compute-resp/1"
HEADER_RESPONSE_SIGNATURE = "X-Response-Signature"
HEADER_RESPONSE_HOTKEY = "X-Response-Hotkey"


class WalletError(Exception):
    """A wallet or one of its key files cannot be opened."""


@dataclass(frozen=True)
class KeyWallet:
    """Wallet-shaped holder of a loaded hotkey (what ``http_auth.sign`` wants, without file I/O).

    ``coldkeypub`` is optional and public only; a KeyWallet never holds a coldkey secret, so
    ``coldkey`` is ``None`` and anything that would sign with the coldkey fails loudly.
    """

    keypair: Keypair
    coldkeypub: Keypair | None = None

    @property
    def hotkey(self) -> Keypair:
        return self.keypair

    @property
    def coldkey(self) -> None:
        return None

    @property
    def ss58(self) -> str:
        return self.keypair.ss58_address

    @classmethod
    def from_wallet(cls, wallet: Any) -> KeyWallet:
        """Load ``wallet.hotkey`` (and its public coldkey, if present) once."""
        if isinstance(wallet, KeyWallet):
            return wallet
        if isinstance(wallet, Keypair):
            return cls(wallet)
        try:
            hotkey = wallet.hotkey
        except (FileNotFoundError, OSError) as exc:
            raise WalletError(f"cannot load hotkey: {exc}") from exc
        try:
            coldkeypub = wallet.coldkeypub
        except (FileNotFoundError, OSError, AttributeError):
            coldkeypub = None
        return cls(hotkey, coldkeypub)


def load_wallet(name: str, hotkey: str, path: str) -> bt.Wallet:
    """Open ``bt.Wallet(name, hotkey, path)`` and check that its hotkey and coldkeypub load.

    Raises :class:`WalletError` with the wallet coordinates and the missing file.
    """
    try:
        wallet = bt.Wallet(name=name, hotkey=hotkey, path=path)
        wallet.hotkey  # noqa: B018 - loads the key file; fail now rather than at first request
        wallet.coldkeypub  # noqa: B018
    except (FileNotFoundError, OSError, ValueError) as exc:
        raise WalletError(
            f"wallet name={name!r} hotkey={hotkey!r} path={path!r} cannot be loaded: {exc} "
            "(create it with `btcli wallet create` or pass --wallet.name/--wallet.hotkey/--wallet.path)"
        ) from exc
    except Exception as exc:  # keyfile decode errors come from the Rust core as various types
        raise WalletError(
            f"wallet name={name!r} hotkey={hotkey!r} path={path!r} is unreadable: {exc}"
        ) from exc
    return wallet


def response_message(nonce_ns: int, body: bytes) -> bytes:
    """The exact bytes a response signature covers."""
    digest = hashlib.sha256(body).hexdigest().encode()
    return RESPONSE_SCHEME + b"|" + str(int(nonce_ns)).encode() + b"|" + digest


def sign_response(keypair: Keypair, nonce_ns: int, body: bytes) -> str:
    """Hex signature (``0x``-prefixed) of a response body bound to the request nonce."""
    return "0x" + bytes(keypair.sign(response_message(nonce_ns, body))).hex()


def verify_response(hotkey_ss58: str, nonce_ns: int, body: bytes, signature_hex: str) -> bool:
    """True when ``signature_hex`` is ``hotkey_ss58``'s signature of this response; never raises."""
    try:
        signature = bytes.fromhex(signature_hex.removeprefix("0x"))
        return bool(_sp_verify(response_message(nonce_ns, body), signature, hotkey_ss58))
    except (ValueError, TypeError):
        return False


class KeptRequestError(ValueError):
    """A kept signed request has no valid nonce or its signature does not verify."""


class _AnyNonce:
    """Kept requests are old on purpose, and re-checked: every nonce is accepted."""

    def check_and_store(self, hotkey_ss58: str, nonce_ns: int) -> bool:
        return True


def verify_kept_request(headers: dict[str, str], body: str, path: str, receiver: str) -> tuple[str, int]:
    """(signer hotkey, nonce in ns) of a btauth/1 POST to ``path`` addressed to ``receiver``.

    For a request kept as evidence (a receipt) and verified later, by anyone: the signature is
    checked at the request's own nonce time, so neither its age nor an earlier check refuses it.
    Raises :class:`KeptRequestError` with the reason.
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    try:
        nonce = int(lowered.get(http_auth.HEADER_NONCE.lower(), ""))
    except ValueError:
        raise KeptRequestError("no valid nonce") from None
    try:
        caller = http_auth.verify(
            headers,
            body.encode(),
            method="POST",
            path=path,
            self_hotkey_ss58=receiver,
            nonce_store=_AnyNonce(),
            now_ns=nonce,
        )
    except http_auth.AuthError as error:
        raise KeptRequestError(f"signature does not verify ({error})") from None
    return caller.hotkey_ss58, nonce
