"""compute.settings: dotted flags over environment over .env over defaults; clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from compute.settings import SettingsError, load_dotenv, parse_miner


def test_defaults_match_the_documented_values():
    s = parse_miner([], env={})
    assert (s.common.netuid, s.common.network, s.axon_port, s.backend, s.ssh_port_range) == (
        27,
        "finney",
        8091,
        "docker",
        (40000, 40999),
    )
    assert s.common.is_mainnet and s.common.wallet_path == Path("~/.bittensor/wallets").expanduser()


def test_flag_beats_environment_beats_dotenv(tmp_path: Path):
    env_file = tmp_path / ".env"
    env_file.write_text(
        '# secrets\nexport BT_WALLET="from-file"\nBT_WALLET_HOTKEY=hk-file\nWANDB_API_KEY=k1 # c\n'
    )
    env = {**load_dotenv(env_file), "BT_WALLET_HOTKEY": "hk-env", "COMPUTE_MINER_MAX_CPU": "8"}
    s = parse_miner(["--wallet.hotkey", "hk-flag", "--miner.whitelist_hotkeys", "a,b", "c"], env=env)
    assert (s.common.wallet_name, s.common.wallet_hotkey, s.max_cpu) == ("from-file", "hk-flag", 8)
    assert s.whitelist_hotkeys == ("a", "b", "c")
    assert s.common.wandb_api_key.get_secret_value() == "k1" and "k1" not in repr(s)


def test_sim_network_publishes_loopback_and_is_not_mainnet():
    s = parse_miner(["--subtensor.network", "sim:/tmp/c.db", "--miner.gpus", "0,2"], env={})
    assert (s.public_ip, s.common.is_mainnet, s.gpus) == ("127.0.0.1", False, (0, 2))


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--miner.ssh_port_range", "50-40"], "--miner.ssh_port_range"),
        (["--miner.ssh_port_range", "abc"], "expected LOW-HIGH"),
        (["--miner.backend", "podman"], "--miner.backend"),
        (["--miner.gpus", "0,x"], "--miner.gpus"),
        (["--netuid", "-1"], "--netuid"),
        (["--miner.max_lease_days", "365"], "--miner.max_lease_days"),
    ],
)
def test_bad_values_name_the_flag(argv, says):
    with pytest.raises(SettingsError, match=says):
        parse_miner(argv, env={})


def test_bad_boolean_environment_value_is_reported():
    with pytest.raises(SettingsError, match="--miner.force_embedded: expected true/false"):
        parse_miner([], env={"COMPUTE_MINER_FORCE_EMBEDDED": "maybe"})


def test_public_network_requires_external_ip():
    with pytest.raises(SettingsError, match="--axon.external_ip is required"):
        _ = parse_miner([], env={}).public_ip


def test_malformed_dotenv_line_is_reported(tmp_path: Path):
    (tmp_path / ".env").write_text("GOOD=1\nthis is not an assignment\n")
    with pytest.raises(SettingsError, match=r"\.env:2"):
        load_dotenv(tmp_path / ".env")


@pytest.mark.parametrize("value", [5, None, ["40000", "40999"], (40000,)])
def test_port_range_that_is_not_a_pair_is_a_validation_error_not_a_crash(value):
    from pydantic import ValidationError

    from compute.settings import CommonSettings, MinerSettings

    common = CommonSettings(network="sim:/tmp/x.db")
    with pytest.raises(ValidationError, match="ssh_port_range"):
        MinerSettings(common=common, ssh_port_range=value)


def test_dotenv_quotes_export_comments_and_a_bare_key(tmp_path: Path):
    (tmp_path / ".env").write_text(
        "# comment\nexport BT_WALLET='my wallet'\nCOMPUTE_MINER_MAX_CPU=8 # eight\nEMPTY=\nQ=\"a#b\"\n"
    )
    assert load_dotenv(tmp_path / ".env") == {
        "BT_WALLET": "my wallet",
        "COMPUTE_MINER_MAX_CPU": "8",
        "EMPTY": "",
        "Q": "a#b",
    }
    (tmp_path / "bare.env").write_text("GOOD=1\n\nJUSTAKEY\n")
    with pytest.raises(SettingsError, match=r"bare\.env:3: expected KEY=VALUE, got 'JUSTAKEY'"):
        load_dotenv(tmp_path / "bare.env")


def test_volume_flags_parse_and_bad_values_name_the_flag():
    s = parse_miner([], env={})
    assert (s.volume_max_gb, s.volume_max_gb_per_renter, s.volume_retention_days, s.volume_quota) == (
        1000.0,
        200.0,
        7.0,
        "auto",
    )
    s = parse_miner(
        [
            "--miner.volume_max_gb",
            "50",
            "--miner.volume_retention_days",
            "0.5",
            "--miner.volume_quota",
            "watch",
        ],
        env={},
    )
    assert (s.volume_max_gb, s.volume_retention_days, s.volume_quota) == (50.0, 0.5, "watch")
    with pytest.raises(SettingsError, match="--miner.volume_quota"):
        parse_miner(["--miner.volume_quota", "soft"], env={})
    with pytest.raises(SettingsError, match="--miner.volume_max_gb_per_renter"):
        parse_miner(["--miner.volume_max_gb_per_renter", "-1"], env={})
