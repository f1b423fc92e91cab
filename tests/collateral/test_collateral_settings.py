"""The validator's ``--collateral.*`` flags: off by default, clear errors, the EVM key never shown."""

from __future__ import annotations

import pytest

from compute.collateral.settings import CollateralSettings
from compute.settings import SettingsError
from compute.validator import parse_validator

ADDRESS = "0x" + "ab" * 20


def test_collateral_is_off_unless_an_rpc_is_named() -> None:
    settings = parse_validator([], env={})
    assert settings.collateral == CollateralSettings() and not settings.collateral.enabled


def test_flags_and_environment_build_the_settings_and_hide_the_key() -> None:
    env = {"COLLATERAL_EVM_KEY": "11" * 32, "COMPUTE_COLLATERAL_ADDRESS": ADDRESS}
    argv = ["--collateral.rpc", "http://127.0.0.1:8545", "--collateral.peers", "http://a:1/, http://b:2"]
    settings = parse_validator([*argv, "--collateral.port", "8093", "--collateral.floor", "0.25"], env=env)
    collateral = settings.collateral
    assert collateral.enabled and collateral.address == ADDRESS and collateral.port == 8093
    assert collateral.peers == ("http://a:1", "http://b:2") and collateral.floor == 0.25
    assert collateral.evm_key_hex is not None and collateral.evm_key_hex.get_secret_value() == "11" * 32
    assert "11" * 32 not in repr(settings)


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--collateral.rpc", "http://127.0.0.1:8545"], "--collateral.address"),
        (["--collateral.rpc", "ftp://x", "--collateral.address", ADDRESS], "--collateral.rpc"),
        (["--collateral.peers", "not a url"], "--collateral.peers"),
        (["--collateral.floor", "1.5"], "--collateral.floor"),
        (["--collateral.dead_seconds", "0"], "--collateral.dead_seconds"),
    ],
)
def test_bad_flags_name_the_flag(argv: list[str], flag: str) -> None:
    with pytest.raises(SettingsError, match=flag.replace(".", r"\.")):
        parse_validator(argv, env={})
