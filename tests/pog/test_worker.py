"""The self-contained worker script, run as a bare ``python3 -I`` subprocess from a temp dir."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from compute.pog import Commitment, Opening, choose_openings, new_challenge, verify, worker_script


@pytest.fixture
def worker(tmp_path: Path):
    source, digest = worker_script()
    script = tmp_path / "worker.py"
    script.write_text(source)
    proc = subprocess.Popen(
        [sys.executable, "-I", "-u", str(script), "--device", "cpu"],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def call(message) -> dict:
        line = message if isinstance(message, str) else json.dumps(message)
        proc.stdin.write(line + "\n")
        proc.stdin.flush()
        return json.loads(proc.stdout.readline())

    yield call
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


def test_script_is_self_contained_and_hashed() -> None:
    source, digest = worker_script()
    assert len(digest) == 64 and worker_script() == (source, digest)
    assert "from ." not in source and "import compute" not in source and "import pydantic" not in source
    compile(source, "worker.py", "exec")


@pytest.mark.slow
def test_worker_round_verifies(worker) -> None:
    info = worker({"op": "info"})
    assert info["ok"] and info["cuda"] is False and info["devices"][0]["name"] == "cpu"
    challenge = new_challenge("fp16", 24, 2000, 20, 2, chunk=512)
    warm = worker({"op": "warmup", "challenge": challenge.model_dump()})  # before the validator's clock
    assert warm["ok"] and warm["op"] == "warmup" and warm["warm_s"] > 0
    reply = worker({"op": "commit", "challenge": challenge.model_dump()})
    assert reply["ok"] and reply["op"] == "commit"
    commitment = Commitment.model_validate(reply["commitment"])
    request = choose_openings(challenge)
    reply = worker({"op": "open", "request": request.model_dump()})
    opening = Opening.model_validate(reply["opening"])
    verdict = verify(challenge, commitment, request, opening)
    assert verdict.ok, verdict.reasons
    assert worker({"op": "exit"}) == {"ok": True, "op": "exit"}


@pytest.mark.parametrize(
    ("message", "error"),
    [
        ("not json", "JSONDecodeError"),
        ({"op": "format-disk"}, "unknown op"),
        ({"nop": 1}, 'string "op"'),
        ({"op": "open", "request": {}}, "nothing committed"),
        ({"op": "commit", "challenge": {"precision": "fp64"}}, "precision"),
        ({"op": "commit", "challenge": None}, "challenge must be an object"),
        ({"op": "warmup", "challenge": {"m": 1}}, "precision"),
    ],
    ids=[
        "not-json",
        "unknown-op",
        "no-op",
        "open-before-commit",
        "bad-precision",
        "null-challenge",
        "bad-warmup",
    ],
)
@pytest.mark.slow
def test_worker_reports_errors_and_keeps_serving(worker, message, error: str) -> None:
    reply = worker(message)
    assert reply["ok"] is False and error in reply["error"]
    assert worker({"op": "info"})["ok"] is True


@pytest.mark.slow
def test_worker_refuses_openings_of_another_challenge(worker) -> None:
    challenge = new_challenge("fp32", 8, 64, 8, 1)
    assert worker({"op": "commit", "challenge": challenge.model_dump()})["ok"]
    other = choose_openings(new_challenge("fp32", 8, 64, 8, 1))
    reply = worker({"op": "open", "request": other.model_dump()})
    assert reply["ok"] is False and "does not match" in reply["error"]
    bad_rows = choose_openings(challenge).model_dump() | {"rows": [[8]]}
    assert "row index" in worker({"op": "open", "request": bad_rows})["error"]


def test_worker_refuses_oversized_request_and_keeps_serving(worker) -> None:
    reply = worker('{"op":"info","pad":"' + "x" * (2 << 20) + '"}')
    assert reply["ok"] is False and "larger than" in reply["error"]
    assert worker({"op": "info"})["ok"] is True
