"""Helpers shared by the operator tests (imported as a top-level module by pytest's rootdir path)."""

from __future__ import annotations

import asyncssh

from compute.operator import BookEntry

GPU_NAME = "NVIDIA H100 80GB HBM3"  # the pretend GPU of the test miners (only the GPU is faked)

HOST_LINE = asyncssh.generate_private_key("ssh-ed25519").export_public_key("openssh").decode().strip()


def book_entry(
    lease_id: str, owner: str = "5Owner", state: str = "active", created: float = 1.0
) -> BookEntry:
    return BookEntry(
        lease_id=lease_id,
        owner_hotkey=owner,
        network="sim:x",
        netuid=27,
        miner_uid=3,
        miner_hotkey="5Miner",
        endpoint="127.0.0.1:8091",
        state=state,
        verified=True,
        gpu_summary="1 x H100",
        requirements={"gpu_count": 1},
        ssh_host="127.0.0.1",
        ssh_port=40100,
        ssh_username="lease",
        host_key=HOST_LINE,
        ports={8080: 40101},
        known_hosts_path="/k",
        private_key_path="/p",
        public_key="ssh-ed25519 AAAA",
        key_generated=True,
        created_at=created,
        expires_at=3601.0,
        updated_at=1.0,
    )


def run_measured(argv: list[str], env: dict[str, str]) -> tuple[int, str, int, float]:
    """Run ``argv`` to its end: (exit code, stdout, peak resident KiB, seconds). The peak is the
    child's own ``VmHWM`` after ``exec`` (``ru_maxrss`` would also count the pre-``exec`` copy of
    a large test process)."""
    import subprocess
    import time
    from pathlib import Path

    started = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    status, peak = Path(f"/proc/{proc.pid}/status"), 0
    while proc.poll() is None:
        try:
            line = next(x for x in status.read_text().splitlines() if x.startswith("VmHWM:"))
            peak = max(peak, int(line.split()[1]))
        except (OSError, StopIteration, ValueError):
            pass
        time.sleep(0.02)
    out = proc.stdout.read().decode() if proc.stdout else ""
    return proc.returncode, out, peak, time.monotonic() - started
