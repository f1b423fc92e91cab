"""One flag convention, one-line errors: what a person typing at the people-facing entry points gets.

A property test (hypothesis, derandomised) feeds generated argument lists (real commands and
flags, misspelt ones, hostile values) to ``register.py``, ``neurons/miner.py`` and
``python -m compute``: a bad command line is one line on stderr and exit 2, never a traceback.
Then the cases from the walk-through, each through the real CLI against a real miner:
``allocate --gpu-count -1``, a misspelt command, ``extend --ttl 10m``, ``exec`` on an expired
lease, tables read through a pipe, and the interactive menu's question before renting.
"""

from __future__ import annotations

import io
import json
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shellflow import allocate, cli, cli_text

from compute.operator import EXIT_OK, EXIT_USAGE, main
from compute.operator.book import LeaseBook
from compute.operator.cli import build_parser

FAST = settings(
    max_examples=12,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
THOROUGH = settings(FAST, max_examples=300)
COMMANDS = sorted(build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
FLAGS = build_parser().option_strings() + ["--gpu-count", "--ttl", "--until", "--max-price", "--ports"]
VALUES = st.one_of(
    st.sampled_from(
        ["-1", "0", "1e999", "nan", "inf", "-inf", "", " ", "2h", "10m", "soon", "last", "1" * 40]
    ),
    st.sampled_from(["99999999999999999999w", "2001-01-01T00:00Z", "25:99", "x=1", "--", "-", "☃", "a\x00b"]),
    st.text(max_size=12),
    st.integers(min_value=-(10**12), max_value=10**12).map(str),
)


def _misspelt(word: str) -> st.SearchStrategy[str]:
    return st.integers(0, len(word) - 1).map(lambda i: word[:i] + word[i + 1 :])


ARGV = st.lists(
    st.one_of(
        st.sampled_from(COMMANDS),
        st.sampled_from(COMMANDS).flatmap(_misspelt),
        st.sampled_from(FLAGS),
        st.sampled_from(FLAGS).flatmap(_misspelt),
        VALUES,
    ),
    max_size=6,
)


def _refused_in_one_line(tmp_path, argv: list[str], as_json: bool) -> None:
    """Without a wallet nothing can run: every line is refused in one line, exit 2 (or is --help)."""
    out, err = io.StringIO(), io.StringIO()
    fixed = ["--wallet.path", str(tmp_path / "no-wallets"), "--subtensor.network", f"sim:{tmp_path}/none.db"]
    code = main([*fixed, *(["--json"] if as_json else []), *argv], stdout=out, stderr=err)
    if code == EXIT_OK:
        assert {"-h", "--help"} & set(argv)  # argparse printed the usage
        return
    assert code == EXIT_USAGE, (argv, out.getvalue(), err.getvalue())
    if as_json:  # one JSON document on stdout, nothing on stderr
        body = json.loads(out.getvalue())
        assert body["ok"] is False and "\n" not in body["error"]["message"] and err.getvalue() == "", argv
    else:
        assert err.getvalue().count("\n") == 1 and "Traceback" not in err.getvalue(), (argv, err.getvalue())
        assert err.getvalue().startswith("error (usage): ")


@FAST
@given(argv=ARGV, as_json=st.booleans())
def test_any_command_line_is_one_line_and_exit_2_or_help(tmp_path, argv, as_json):
    _refused_in_one_line(tmp_path, argv, as_json)


@pytest.mark.slow
@THOROUGH
@given(argv=ARGV, as_json=st.booleans())
def test_any_command_line_is_one_line_and_exit_2_or_help_thoroughly(tmp_path, argv, as_json):
    _refused_in_one_line(tmp_path, argv, as_json)


MINER_FLAGS = ["--axon.port", "--miner.backend", "--miner.price", "--miner.ssh_port_range", "--miner.gpus"]


@FAST
@given(
    argv=st.lists(
        st.one_of(st.sampled_from(MINER_FLAGS), st.sampled_from(MINER_FLAGS).flatmap(_misspelt), VALUES),
        max_size=4,
    )
)
def test_the_miner_refuses_a_bad_command_line_in_one_line(monkeypatch, capsys, argv):
    import neurons.miner as miner

    async def started(settings) -> int:  # a good line would start the miner: stop there
        return 0

    monkeypatch.setattr(miner, "run", started)
    monkeypatch.setattr(miner, "configure_logging", lambda *a, **k: None)
    try:
        code = miner.main(["--wallet.path", "/nonexistent", *argv])
    except SystemExit as exc:  # argparse's own exit (a bad flag), as the neuron sees it
        code = exc.code
    err = capsys.readouterr().err
    if code != 0:
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, (argv, err)


def test_python_m_compute_names_the_command_you_meant(capsys):
    from compute.__main__ import main as compute_main

    assert compute_main(["miner-reprt"]) == 2
    err = capsys.readouterr().err
    assert err == "error: unknown command 'miner-reprt'; did you mean 'miner-report'? (--help lists them)\n"
    with pytest.raises(SystemExit) as stopped:  # python -m exits with the parser's code
        compute_main(["miner-report", "--last", "-3", "--hotkey", "x"])
    assert stopped.value.code == 2 and capsys.readouterr().err.count("\n") == 1


def test_a_negative_gpu_count_and_a_misspelt_command_are_one_line(subnet):
    code, out, err = cli_text(subnet, "operator_a", "allocate", "--gpu-count", "-1")
    assert (code, out) == (EXIT_USAGE, "")
    assert err == (
        "error (usage): register.py allocate: argument --gpu-count: -1 is negative; give 0 or more "
        "(see register.py allocate --help)\n"
    )
    code, _, err = cli_text(subnet, "operator_a", "alocate", "--ttl", "2h")
    assert code == EXIT_USAGE and "unknown command 'alocate'; did you mean 'allocate'?" in err
    code, _, err = cli_text(subnet, "operator_a", "allocate", "--gpu-cont", "1")
    assert code == EXIT_USAGE and "unknown flag --gpu-cont; did you mean --gpu-count?" in err


def test_ttl_sets_every_term_and_the_old_spellings_still_work(subnet):
    lease = allocate(subnet)  # --duration 30m: the old spelling
    code, body = cli(subnet, "operator_a", "extend", lease, "--ttl", "10m")
    assert code == EXIT_OK, body
    assert body["lease"]["expires_at"] - body["lease"]["created_at"] == pytest.approx(2400, abs=2)
    code, body = cli(subnet, "operator_a", "extend", "last", "--hours", "1")
    assert code == EXIT_OK and body["lease"]["lease_id"] == lease
    assert body["lease"]["expires_at"] - body["lease"]["created_at"] == pytest.approx(6000, abs=2)
    code, body = cli(subnet, "operator_a", "resources", "--gpu-memory", "10", "--ram-gb", "1")
    assert code == EXIT_OK, body
    code, body = cli(subnet, "operator_a", "extend", lease, "--ttl", "10m", "--hours", "1")
    assert code == EXIT_USAGE and body["error"]["message"] == "give --hours or --ttl, not both"


def test_exec_on_an_expired_lease_says_it_expired(subnet):
    lease = allocate(subnet)
    book = LeaseBook(subnet.root / "register-operator_a" / "leases.db")
    entry = book.get(lease)
    book.save(entry.with_changes(expires_at=time.time() - 60))  # its term ran out a minute ago
    code, out, err = cli_text(subnet, "operator_a", "exec", lease, "--", "true")
    assert code != EXIT_OK and out == ""
    assert err.startswith(f"error (lease_expired): lease {lease} expired at ") and err.count("\n") == 1


def test_tables_are_whole_when_piped(subnet, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    allocate(subnet)
    code, out, _ = cli_text(subnet, "operator_a", "list")
    assert code == EXIT_OK
    header = next(line for line in out.splitlines() if "Lease" in line and "Time left" in line)
    for column in ("Miner", "GPUs", "SSH", "State", "Health"):
        assert column in header
    assert "…" not in out.replace("…)", "")  # only the hotkeys shortened on purpose, no cut cells
    code, out, _ = cli_text(subnet, "operator_a", "resources")
    assert code == EXIT_OK and "Disk free" in out and "Price" in out


def _menu(subnet, monkeypatch, answers: list[str], *flags: str) -> tuple[int, str]:
    given_answers = iter(answers)

    def read(prompt: str = "") -> str:
        try:
            return next(given_answers)
        except StopIteration:
            raise EOFError from None

    monkeypatch.setattr("builtins.input", read)
    out = io.StringIO()
    code = main([*subnet.flags("operator_a"), "interactive", *flags], stdout=out, stderr=io.StringIO())
    return code, out.getvalue()


RENT = ["2", "", "1", "30m", "", "", ""]  # allocate: any model, 1 GPU, 30 minutes, best match, new key


def test_the_menu_shows_the_machine_and_asks_before_renting(subnet, monkeypatch):
    code, out = _menu(subnet, monkeypatch, [*RENT, "n"])
    assert code == EXIT_OK and "Not rented." in out and "Lease allocated" not in out
    assert f"Rent 1 x NVIDIA H100 80GB HBM3 from miner uid {subnet.miner_uid}" in out
    assert "for 0.5 h, no price named? [y/n] (n): Not rented." in out
    assert cli(subnet, "operator_a", "list")[1]["leases"] == []
    code, out = _menu(subnet, monkeypatch, [*RENT, "y"])
    assert code == EXIT_OK and "Lease allocated" in out
    code, out = _menu(
        subnet, monkeypatch, ["2", "", "", "30m", "", "", ""], "--yes"
    )  # no GPU left: a CPU lease
    assert code == EXIT_OK and "Lease allocated" in out and "[y/n]" not in out
    assert len(cli(subnet, "operator_a", "list")[1]["leases"]) == 2
