"""compute.flags: a field declared once gives its flag, its help, its variables and its layer order."""

from __future__ import annotations

import argparse

import pytest

from compute.flags import Layered, SettingsError, add_flags, environment, flag


class Demo(Layered):
    name: str = flag("demo.name", "plain", "a name (default {default})", env=("DEMO_NAME",))
    size: float = flag("demo.size", 30.0, "a size ({default})", gt=0)
    on: bool = flag("demo.on", False, "a switch")
    secret: str | None = flag(None, None, env=("DEMO_SECRET",))


def parser() -> argparse.ArgumentParser:
    built = argparse.ArgumentParser()
    add_flags(built, Demo)
    return built


def build(argv: list[str], environ: dict[str, str]) -> Demo:
    return Demo.layered(parser().parse_args(argv), environ)


@pytest.mark.parametrize(
    "argv, environ, name",
    [
        ([], {}, "plain"),
        ([], {"COMPUTE_DEMO_NAME": "compute"}, "compute"),
        ([], {"DEMO_NAME": "own", "COMPUTE_DEMO_NAME": "compute"}, "own"),  # its own variable first
        ([], {"DEMO_NAME": "", "COMPUTE_DEMO_NAME": "compute"}, "compute"),  # empty: unset
        (["--demo.name", "flag"], {"DEMO_NAME": "own", "COMPUTE_DEMO_NAME": "compute"}, "flag"),
    ],
)
def test_a_flag_wins_over_its_variables_which_win_over_the_default(
    argv: list[str], environ: dict[str, str], name: str
) -> None:
    assert build(argv, environ).name == name


def test_the_process_environment_wins_over_the_dotenv_file(tmp_path, monkeypatch) -> None:
    (tmp_path / ".env").write_text("COMPUTE_DEMO_NAME=dotenv\nCOMPUTE_DEMO_SIZE=5\nDEMO_SECRET=s\n")
    monkeypatch.setenv("COMPUTE_DEMO_NAME", "process")
    merged = environment(argparse.Namespace(env_file=str(tmp_path / ".env")))
    assert Demo.layered(argparse.Namespace(), merged) == Demo(name="process", size=5.0, secret="s")


def test_the_parser_is_built_from_the_fields() -> None:
    actions = {action.dest: action for action in parser()._actions}
    assert actions["demo.name"].help == "a name (default plain)" and actions["demo.name"].default is None
    assert actions["demo.size"].help == "a size (30)" and actions["demo.size"].type is float
    assert actions["demo.on"].nargs == 0 and actions["demo.on"].default is None
    assert set(actions) == {"help", "demo.name", "demo.size", "demo.on"}  # a secret is never a flag


@pytest.mark.parametrize(
    "argv, environ, error",
    [
        (["--demo.size", "0"], {}, "--demo.size: Input should be greater than 0"),
        ([], {"COMPUTE_DEMO_SIZE": "big"}, "--demo.size: Input should be a valid number, unable to parse"),
        ([], {"COMPUTE_DEMO_ON": "maybe"}, "--demo.on: expected true/false, got 'maybe'"),
    ],
)
def test_a_bad_value_names_its_flag(argv: list[str], environ: dict[str, str], error: str) -> None:
    with pytest.raises(SettingsError) as caught:
        build(argv, environ)
    assert str(caught.value).startswith(error)


def test_switches_read_yes_and_no_from_the_environment() -> None:
    assert build([], {"COMPUTE_DEMO_ON": "Yes"}).on and not build([], {"COMPUTE_DEMO_ON": "off"}).on


def test_a_model_built_directly_reads_no_environment(monkeypatch) -> None:
    monkeypatch.setenv("COMPUTE_DEMO_NAME", "process")
    assert Demo().name == "plain"
