"""``python -m compute.pog worker``: the script the validator ships, written where asked."""

from __future__ import annotations

from compute.pog.__main__ import main


def test_worker_command_writes_the_script(tmp_path, capsys) -> None:
    target = tmp_path / "worker.py"
    assert main(["worker", "--output", str(target)]) == 0
    assert "sha256=" in capsys.readouterr().out and "def serve(" in target.read_text()
