"""The committed artifact is what contracts/ compiles to (pinned solcjs)."""

from __future__ import annotations

import json
import os

import pytest

from compute.collateral import build


@pytest.mark.slow
def test_the_committed_artifact_matches_the_sources() -> None:
    compiler = build.find_compiler()
    if compiler is None:
        message = f"node and npm's solc {build.SOLC_VERSION} are not installed (set COMPUTE_SOLC_DIR)"
        if os.environ.get("COMPUTE_REQUIRE_SOLC") == "1":
            pytest.fail(message)
        pytest.skip(message)
    assert build.differences(compiler) == []


def test_the_artifact_records_its_sources_and_compiler() -> None:
    artifact = json.loads(build.ARTIFACT.read_text())
    assert artifact["compiler"].startswith(build.SOLC_VERSION + "+")
    assert set(artifact["sources"]) == set(build.sources())
    assert {"Collateral", "SubtensorStakeSource", "MetagraphDouble", "UidLookupDouble"} <= set(
        artifact["contracts"]
    )


@pytest.mark.slow
def test_an_edited_source_is_caught(tmp_path, monkeypatch) -> None:
    compiler = build.find_compiler()
    if compiler is None:
        pytest.skip("no compiler")
    copy = tmp_path / "contracts.json"
    artifact = json.loads(build.ARTIFACT.read_text())
    artifact["contracts"]["Collateral"]["bytecode"] = (
        artifact["contracts"]["Collateral"]["bytecode"][:-2] + "00"
    )
    copy.write_text(build.render(artifact))
    assert build.differences(compiler, copy) == ["contract Collateral differs (abi or bytecode)"]
