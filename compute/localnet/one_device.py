"""One device behind several leases: the emulated GPU the demo's and the tests' cheaters share.

A GPU holds one resident matrix at a time; a CPU does not (the demo's honest miners are CPUs, and
RAM is plentiful). To play the device-sharing cheats for real on this machine, the cheating miners'
leases run this worker instead of ``python3``: it speaks the bootstrap honestly, runs the genuine
worker source, and adds one *device*: an exclusive lock file every lease of the cheater shares. The
memory proof's matrix is resident only while a lease holds the device, and the device runs at the
claimed model's table figures (each pass takes the matrix's bytes over the table bandwidth; a
build at least regenerating the matrix at the table's fastest regeneration rate), as a GPU at its
table figures would. The cheater picks WHEN a lease takes the device (``MODE``), its best plays:

- ``wait-info``: the lease waits for the device before answering ``info`` and holds it to the end;
- ``wait-build``: answers at once, waits for the device when asked to build, frees it right after
  its chain (serialise only the resident part);
- ``try-build``: as ``wait-build``, but a lease that finds the device busy says so at once (no wait);
- ``late-start``: answers the build at once without the device (a lie), takes the device when the
  start nonce comes, builds, then runs its chain (the chain begins as early as the device allows).
- ``regen-first``: a lease that finds the device busy at the build answers at once (its matrix in
  host memory, not on the device) and computes its passes by regenerating the matrix at the fastest
  rate the validator assumes while another lease's chain holds the device; when the device is free
  it takes it, its next pass regenerates and stores the matrix, and the rest run at the table's
  bandwidth (its chain begins in time, and its mean pass passes: the slow passes are paid for by the
  fast ones).

With one lease at a time every mode is an honest single device: its credit is the device's honest
share, the yardstick of the cheater tests. The device keeps its pace (each pass due one pass time
after the one before it, from the chain's start), so a busy machine delays a pass but not the chain. ``send_away`` takes the device elsewhere (its leases then
find no device: a hit and run between its appearances). ``device_bin`` writes the ``python3`` shim a lease's
``PATH`` starts with (``EmbeddedBackend(path_prefix=...)``). Demo and tests only: nothing in the
miner imports it. Run as a script it is the worker (stdlib and numpy only, like the real one).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import stat
import sys
import time
import types
from pathlib import Path

MODES = ("wait-info", "wait-build", "try-build", "late-start", "regen-first")
TABLE_GBS = 0.1  # the claimed model's bandwidth: the CPU fallback's (the validator's cpu_bandwidth_gbs)
REGEN_RATE = 1e9  # element-rounds/s: the validator's cpu_regen_rate (its fastest plausible rebuild)


AWAY = ".away"  # beside the device file: the device is elsewhere (its leases find no device)


def send_away(device: Path, away: bool = True) -> None:
    """Take the device elsewhere (a hit and run between its appearances), or bring it back."""
    marker = Path(str(device) + AWAY)
    if away:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    else:
        marker.unlink(missing_ok=True)


def device_bin(
    root: Path, device: Path, mode: str, gbs: float = TABLE_GBS, regen_rate: float = REGEN_RATE
) -> Path:
    """A directory whose ``python3`` runs this worker on ``device`` in ``mode`` (put it first on PATH):
    passes at ``gbs``, a rebuild (or a regenerated pass) at ``regen_rate`` element-rounds/s."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    directory = root / f"device-{mode}-{gbs:g}-{regen_rate:g}"
    directory.mkdir(parents=True, exist_ok=True)
    shim = directory / "python3"
    shim.write_text(
        "#!/bin/sh\n"  # a renter's ``python3 --version`` is answered by the real interpreter
        f'case "$1" in --version|-V) exec "{sys.executable}" "$@";; esac\n'
        f'exec "{sys.executable}" -u "{Path(__file__).resolve()}" "{device}" {mode} {gbs} {regen_rate}\n'
    )
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return directory


class Device:
    """The exclusive device: an ``flock`` on one file every lease of the cheater opens."""

    def __init__(self, path: str) -> None:
        self.path = path
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        self.held = False

    def take(self, wait: bool = True) -> None:
        if os.path.exists(self.path + AWAY):
            raise RuntimeError("no device here: it is elsewhere")  # a lease finds no GPU at all
        if not self.held:
            try:  # blocks while another lease holds it (unless told not to wait)
                fcntl.flock(self.fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                raise RuntimeError("the device is busy with another lease") from None
            self.held = True

    def free(self) -> None:
        if self.held:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            self.held = False


def _patch(ns: dict, device: Device, mode: str, gbs: float, regen_rate: float) -> None:
    """The memory proof's engine (``memory_*`` ops, not the host RAM proof) runs on the device."""
    plain, prover, memory_op = ns["MemoryEngine"], ns["ProverEngine"], ns["_memory_op"]
    info = prover.info

    class DeviceEngine(plain):  # type: ignore[misc, valid-type]
        def multiply(self, spec, gpu, a, x):
            """A pass: the matrix read at the table's bandwidth on the device, else regenerated."""
            resident = device.held
            if not resident and mode == "regen-first":
                try:  # free now: this pass regenerates the matrix into the device, the next ones read it
                    device.take(wait=False)
                except RuntimeError:
                    pass  # still busy: regenerate this pass too
            out = super().multiply(spec, gpu, a, x)  # the numbers (from host memory: time is emulated)
            read_s = 4 * spec.n * spec.n / (gbs * 1e9)
            self._pace(gpu, read_s if resident else spec.n * spec.n * spec.hash_rounds / regen_rate)
            return out

        def _pace(self, gpu: int, seconds: float) -> None:
            due = self._due.get(gpu, self._chain_start) + seconds
            self._due[gpu] = due
            time.sleep(max(0.0, due - time.perf_counter()))

        def prepare(self, challenge):
            if mode == "late-start":  # "ready" at once, nothing built: the device comes with the start
                self._lied = challenge
                self._built = ns["parse_memory_challenge"](challenge)
                return {"challenge_id": self._built.challenge_id, "build_s": [0.0] * self._built.gpu_count}
            if mode == "regen-first":
                try:
                    device.take(wait=False)
                except RuntimeError:  # busy: "ready" at once, the matrix in host memory only
                    return super().prepare(challenge)
            return self._build_on_device(challenge)

        def _build_on_device(self, challenge):  # the device, and at least a table-rate rebuild
            device.take(wait=mode != "try-build")
            started = time.perf_counter()
            ready = super().prepare(challenge)
            spec = self._built
            rebuild = spec.n * spec.n * spec.hash_rounds / regen_rate
            time.sleep(max(0.0, rebuild - (time.perf_counter() - started)))
            return ready

        def commit(self, request, emit=None):
            try:
                if mode == "late-start":
                    self._build_on_device(self._lied)
                self._chain_start, self._due = time.perf_counter(), {}
                return super().commit(request, emit)
            finally:
                if mode != "wait-info":
                    device.free()  # the matrix is gone with the chain: the device serves the next lease

    def on_device(box, engine, op, message, emit):
        ns["MemoryEngine"] = DeviceEngine if op.startswith("memory_") else plain
        try:
            return memory_op(box, engine, op, message, emit)
        finally:
            ns["MemoryEngine"] = plain

    def waited_info(self):
        device.take()  # the serialising lease: nothing is answered before the device is free
        return info(self)

    ns["_memory_op"] = on_device
    if mode == "wait-info":
        prover.info = waited_info


def main(argv: list[str]) -> int:
    device_path, mode, gbs = argv[0], argv[1], float(argv[2])
    regen_rate = float(argv[3]) if len(argv) > 3 else REGEN_RATE
    sys.modules["torch"] = None  # type: ignore[assignment]  # the device is emulated: numpy only
    stdin = sys.stdin.buffer
    size = int(stdin.readline(32))
    source = stdin.read(size)
    sys.stdout.write(hashlib.sha256(source).hexdigest() + "\n")
    sys.stdout.flush()
    module = types.ModuleType("pog_worker_lib")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, "pog_worker", "exec"), module.__dict__)
    device = Device(device_path)
    _patch(module.__dict__, device, mode, gbs, regen_rate)
    try:
        return int(module.__dict__["serve"](stdin, sys.stdout, "cpu"))
    finally:
        device.free()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
