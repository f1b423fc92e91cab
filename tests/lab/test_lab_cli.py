"""``python -m compute bench <name>``: one registry and one CLI for every benchmark and simulator."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from compute.__main__ import main as compute_main
from compute.lab.cli import main as lab_main
from compute.lab.cli import resolve
from compute.lab.registry import ENTRIES

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_every_entry_resolves_to_a_main_that_parses_its_own_flags(name: str, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        resolve(name)(["--help"])
    assert exit_info.value.code == 0
    assert f"python -m compute bench {name}" in capsys.readouterr().out


def test_every_lab_module_with_a_main_is_registered() -> None:
    """A benchmark whose ``main`` nobody can reach from the CLI is a benchmark nobody runs."""
    registered = {entry.target.partition(":")[0] for entry in ENTRIES.values()}
    found = set()
    for path in sorted((REPO / "compute" / "lab").rglob("*.py")):
        if "\ndef main(" in path.read_text() and path.parent.name in ("bench", "sim", "fleet"):
            parts = path.relative_to(REPO).with_suffix("").parts
            found.add(".".join(parts[:-1] if parts[-1] in ("cli", "__init__") else parts))
    assert found - registered == set()


def test_the_listing_names_every_entry_and_an_unknown_name_is_refused(capsys) -> None:
    assert compute_main(["bench"]) == 2
    listing = capsys.readouterr().out
    assert all(f"  {name} " in listing for name in ENTRIES)
    assert lab_main(["--help"]) == 0
    assert lab_main(["pog-nonsense"]) == 2
    assert "unknown benchmark 'pog-nonsense'" in capsys.readouterr().err


def test_the_lab_package_runs_a_benchmark_as_a_module() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "compute.lab", "pog-gen", "--threads", "1", "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    assert figures["generator_ns_per_elem_cpu"] > 0 and figures["merkle_vs_sha256"] > 0
    assert figures["roofline_commit_gemm_h100_fp16"] > 1 and "gpu_generator_gbs" not in figures


def test_the_depth_benchmark_prints_one_suite(capsys) -> None:
    assert compute_main(["bench", "pog-depth", "--suite", "scaling", "--device", "cpu", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result) == {"scaling"} and result["scaling"]["gpus_claimed"] == 2
