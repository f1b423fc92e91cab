"""The one sanitiser for peer text (``compute.peertext``) and where the protocol applies it."""

from __future__ import annotations

import io

import pytest
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from compute.peertext import for_rich, printable
from compute.protocol import ErrorResponse, GpuSpec, LeaseHealth, SshAccess
from compute.store import PogResult
from compute.validator.report.table import print_round_table, round_table

HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHh0dHBzOi8vZXhhbXBsZS5jb20vaG9zdGtleQ"


@pytest.mark.parametrize(
    ("text", "limit", "shown"),
    [
        ("plain text, accents é and 漢字", None, "plain text, accents é and 漢字"),
        ("\x1b[2Jclear", None, "\\x1b[2Jclear"),
        (
            "bell\x07 cr\r tab\t nl\n del\x7f c1\x9b",
            None,
            "bell\\x07 cr\\x0d tab\\x09 nl\\x0a del\\x7f c1\\x9b",
        ),
        ("\u202eevil \u2028 \u200b", None, "\\u202eevil \\u2028 \\u200b"),
        ("x" * 50, 10, "x" * 10),
        ("\x1b" * 10, 8, "\\x1b\\x1b"),
        (b"bytes\x1b", None, "b'bytes\\x1b'"),
    ],
)
def test_printable_shows_every_control_character_as_an_escape(text, limit, shown) -> None:
    assert printable(text, limit) == shown
    assert printable(text, limit).isprintable()


def test_printable_never_raises() -> None:
    class Hostile:
        def __str__(self) -> str:
            raise RecursionError

    assert printable(Hostile()) == "<unprintable Hostile>"


def test_peer_text_in_rich_is_text_never_markup() -> None:
    out, text = io.StringIO(), for_rich("[/] [bold]x[/bold] \x1b[31m")
    Console(file=out, width=200, color_system=None).print(f"[red]{text}[/red]")
    assert out.getvalue() == "[/] [bold]x[/bold] \\x1b[31m\n"


def test_protocol_keeps_peer_text_printable_and_bounded() -> None:
    error = ErrorResponse(code="x\x1b", reason="[/] \x1b[2J" + "y" * 1990)
    assert error.code == "x\\x1b" and error.reason.startswith("[/] \\x1b[2J") and len(error.reason) == 2000
    assert (
        GpuSpec(index=0, name="H100\x07", memory_bytes=1, uuid="GPU-\r").model_dump()["uuid"] == "GPU-\\x0d"
    )
    assert LeaseHealth(status="lost", checked_at=1, reason="\u2028").reason == "\\u2028"
    with pytest.raises(ValidationError):
        ErrorResponse(code="x", reason="y" * 2001)  # the bound holds on what was received


@pytest.mark.parametrize(
    "field",
    [
        {"host": "-oProxyCommand=touch /tmp/pwned"},
        {"host": "example.com bad"},
        {"username": "root\nrm"},
        {"username": "-l"},
        {"host_key": HOST_KEY + "\n* ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOther"},
        {"host_key": "not a key"},
    ],
)
def test_ssh_access_refuses_what_would_become_an_option_or_a_known_hosts_line(field) -> None:
    fields = {"host": "203.0.113.10", "port": 40001, "username": "lease", "host_key": HOST_KEY} | field
    with pytest.raises(ValidationError):
        SshAccess(**fields)


def test_round_table_shows_hostile_results_and_never_raises() -> None:
    hostile = "[/] \x1b[2J[bold]ok\u202e"
    results = [
        PogResult(1, 3, "5F" + "x" * 46, False, 0.0, reasons=(f"allocate refused: {hostile}",)),
        PogResult(1, 4, "5G" + "x" * 46, True, 1.0, models=(hostile,), hosts={hostile: 0.0, "b": 1.0}),
        PogResult(1, 5, "5H" + "x" * 46, False, 0.0, reasons=(f"shared device {hostile} (uid 3)",)),
    ]
    out = io.StringIO()
    table = round_table(1, results, {3: 0.0, 4: 1.0}, {4: 1.0})
    assert isinstance(table, Table)
    print_round_table(table, Console(file=out, width=300, color_system=None))
    assert "[/]" in out.getvalue() and "\\x1b[2J" in out.getvalue()
    assert all(line.isprintable() for line in out.getvalue().splitlines())
