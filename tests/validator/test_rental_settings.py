"""``--validator.trusted_renters`` and the canary flags: parsed once, bad input named."""

from __future__ import annotations

import pytest

from compute.settings import SettingsError
from compute.validator import parse_validator, round_params

ALICE = "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY"
BOB = "5FHneW46xGXgs5mUiveU4sbTyGBzmstUspZC92UhjJM694ty"


def test_trusted_renters_come_from_a_comma_list_flag_or_the_environment() -> None:
    s = parse_validator(["--validator.trusted_renters", f"{ALICE}, {BOB}"], {})
    assert s.trusted_renters == (ALICE, BOB)
    assert round_params(s).trusted_renters == frozenset({ALICE, BOB})
    assert parse_validator([], {"COMPUTE_VALIDATOR_TRUSTED_RENTERS": ALICE}).trusted_renters == (ALICE,)
    assert parse_validator([], {}).trusted_renters == ()
    assert parse_validator([], {}).canary_rate == 0.1


def test_canary_hotkeys_and_dwell_come_from_flags_or_the_environment() -> None:
    s = parse_validator(
        ["--validator.canary_hotkeys", "operator, ops-2", "--validator.canary_dwell", "5"], {}
    )
    assert s.canary_hotkeys == ("operator", "ops-2") and s.canary_dwell == 5.0
    env = {"COMPUTE_VALIDATOR_CANARY_HOTKEYS": "operator"}
    assert parse_validator([], env).canary_hotkeys == ("operator",)
    assert parse_validator([], {}).canary_hotkeys == () and parse_validator([], {}).canary_dwell == 60.0


def test_canary_identities_name_their_own_wallets_and_leave_from_their_own_address() -> None:
    s = parse_validator(
        ["--validator.canary_hotkeys", "ops/default, ops-2/k1", "--validator.canary_source", "10.0.0.7"], {}
    )
    assert s.canary_hotkeys == ("ops/default", "ops-2/k1") and s.canary_source == "10.0.0.7"
    assert parse_validator([], {}).canary_source == ""


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--validator.trusted_renters", "not-a-hotkey"], "--validator.trusted_renters"),
        (["--validator.canary_rate", "1.5"], "--validator.canary_rate"),
        (["--validator.canary_hotkeys", "op/../../x"], "--validator.canary_hotkeys"),
        (["--validator.canary_hotkeys", "../x"], "--validator.canary_hotkeys"),
        (["--validator.canary_hotkeys", "a/b/c"], "--validator.canary_hotkeys"),
        (["--validator.canary_source", "not-an-address"], "--validator.canary_source"),
        (["--validator.canary_dwell", "-1"], "--validator.canary_dwell"),
    ],
)
def test_bad_rental_flags_name_the_flag(argv: list[str], flag: str) -> None:
    with pytest.raises(SettingsError, match=flag):
        parse_validator(argv, {})
