"""The fleet benchmark: a small real round end to end, and why its prover can never pass a real validator."""

from __future__ import annotations

import ast
import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from compute.lab.bench.fleet.prover import FleetProver
from compute.lab.bench.fleet.sparse_tree import SparseMerkleTree
from compute.lab.bench.fleet.wire import B64, array_json, encode_line
from compute.pog import (
    check_cpu,
    check_disk,
    check_rows,
    choose_memory_openings,
    choose_openings,
    cpu_request,
    disk_read_request,
    disk_write_request,
    new_challenge,
    plan_memory,
    verify,
    verify_memory,
)
from compute.pog.draws import draws_predictable, predictable_draws
from compute.pog.merkle import MerkleTree
from compute.pog.wire import Commitment, Opening

REPO = Path(__file__).resolve().parents[2]
SEED = bytes(range(32))


def _reply(prover: FleetProver, message: dict) -> dict:
    """The answer's last line as the validator reads it: through the simulated miners' encoder."""
    return json.loads(encode_line(list(prover.handle(message).lines)[-1][1]))


def _gemm_round(seed_in_validator: bytes | None):
    """One GEMM proof of the fleet prover, verified by the real verifier with real or predictable draws."""
    challenge = new_challenge("fp16", 256, 4096, 256, 2)
    prover = FleetProver(SEED, 2, "t")
    commitment = Commitment.model_validate(
        _reply(prover, {"op": "commit", "challenge": challenge.model_dump(mode="json")})["commitment"]
    )
    if seed_in_validator is None:
        request = choose_openings(challenge)
    else:
        with predictable_draws(seed_in_validator):
            request = choose_openings(challenge)
    opened = _reply(prover, {"op": "open", "request": request.model_dump(mode="json")})["opening"]
    return verify(challenge, commitment, request, Opening.model_validate(opened))


def test_fleet_prover_passes_only_where_the_validators_draws_are_predictable() -> None:
    """The guarantee: its answers verify only with the benchmark's seed installed in the validator."""
    assert _gemm_round(SEED).ok
    real = _gemm_round(None)  # the OS CSPRNG, as every real validator draws
    assert not real.ok and "does not match the root" in real.reasons[0]  # it committed filler there
    other = _gemm_round(bytes(32))  # another seed: still unpredictable to this prover
    assert not other.ok
    assert not draws_predictable()


def test_fleet_prover_memory_cpu_and_disk_answers_verify_under_the_benchmarks_draws() -> None:
    prover = FleetProver(SEED, 2, "t")
    challenge = plan_memory(0.004, 1.0, 2, passes=6)
    ready = _reply(prover, {"op": "memory_build", "challenge": challenge.build_message()})
    assert ready["ready"]["challenge_id"] == challenge.challenge_id
    lines = list(prover.handle({"op": "memory_commit", "request": challenge.start_message()}).lines)
    assert [line["op"] for _, line in lines].count("memory_pass") == 2 * 6
    from compute.pog import MemoryCommitment, MemoryOpening

    commitment = MemoryCommitment.model_validate(lines[-1][1]["commitment"])
    with predictable_draws(SEED):
        request = choose_memory_openings(challenge, 3)
        rows = check_rows(challenge)
        opened = _reply(prover, {"op": "memory_open", "request": request.model_dump(mode="json")})
        verdict = verify_memory(
            challenge, commitment, request, MemoryOpening.model_validate(opened["opening"])
        )
        assert verdict.ok, verdict.reasons
        assert verify_memory(
            challenge, commitment, request, MemoryOpening.model_validate(opened["opening"]), rows=rows
        ).ok
        cpu = cpu_request(4, 8)
        result = _reply(prover, {"op": "probe", "request": cpu})["result"]
        assert check_cpu(cpu, result, 0.5).ok
        write = disk_write_request(64 * 4096)
        written = _reply(prover, {"op": "disk_write", "request": {**write, "path": "."}})["result"]
        read_request = disk_read_request(64, seed=write["seed"])
        read = _reply(prover, {"op": "disk_read", "request": read_request})["result"]
        assert check_disk(write, written, 0.1, read_request, read, 1e-5).ok
    real = verify_memory(challenge, commitment, request, MemoryOpening.model_validate(opened["opening"]))
    assert not real.ok  # other secret rows: the filler words are caught


def test_predictable_draws_are_scoped_and_never_nested() -> None:
    with predictable_draws(SEED):
        assert draws_predictable()
        with pytest.raises(RuntimeError, match="already installed"):
            with predictable_draws(SEED):
                pass
    assert not draws_predictable()
    with pytest.raises(ValueError, match="16 bytes"):
        with predictable_draws(b"short"):
            pass


def _names_used(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    names |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    names |= {
        alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names
    }
    modules = {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    return names | modules


def test_only_the_fleet_benchmark_installs_predictable_draws_or_imports_its_prover() -> None:
    """No miner, validator or worker code path can reach the oracle or the benchmark's prover."""
    installers, prover_users = [], []
    for path in [*REPO.joinpath("compute").rglob("*.py"), *REPO.joinpath("neurons").rglob("*.py")]:
        relative = path.relative_to(REPO).as_posix()
        if relative.startswith("compute/lab/bench/fleet/") or relative == "compute/pog/draws.py":
            continue
        used = _names_used(path)
        if "predictable_draws" in used:
            installers.append(relative)
        if any("lab.bench.fleet" in name for name in used):
            prover_users.append(relative)
    assert installers == [] and prover_users == []


@pytest.mark.slow
def test_the_real_validator_and_miner_load_neither_the_benchmark_nor_its_oracle() -> None:
    """At run time too: importing the neurons and the validator's facade leaves the whole lab out
    and every draw on the OS CSPRNG."""
    probe = (
        "import sys\n"
        "import neurons.validator, neurons.miner, compute.validator, compute.pog.worker_main\n"
        "from compute.pog import choose_openings, new_challenge\n"
        "from compute.pog.draws import draws_predictable, oracle_rng\n"
        "assert not draws_predictable() and oracle_rng('gemm-openings', 'x') is None\n"
        "print(sorted(m for m in sys.modules if m.startswith('compute.lab')))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


def test_the_real_worker_has_no_message_for_openings_in_advance() -> None:
    """The worker protocol carries no seed or openings before the commit: an unknown op is refused."""
    from compute.pog.worker_main import serve

    class Out:
        text = ""

        def write(self, data: str) -> None:
            self.text += data

        def flush(self) -> None:
            pass

    import io

    out = Out()
    message = {"op": "draws", "seed": SEED.hex()}
    serve(io.BytesIO(json.dumps(message).encode() + b"\n"), out, "cpu")
    reply = json.loads(out.text.splitlines()[0])
    assert reply["ok"] is False and "unknown op" in reply["error"]


@pytest.mark.parametrize("count", [1, 2, 3, 7, 8, 9, 255, 256, 257, 1000])
def test_sparse_tree_equals_the_full_tree(count: int) -> None:
    rng = np.random.default_rng(count)
    filler = bytes(32)
    special = {int(i): rng.bytes(32) for i in rng.choice(count, size=min(count, 5), replace=False)}
    leaves = [special.get(i, filler) for i in range(count)]
    full, sparse = MerkleTree(leaves), SparseMerkleTree(count, filler, special)
    assert sparse.root == full.root
    for i in [*special, count - 1, 0]:
        assert sparse.path(i) == full.path(i)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_fleet_bench_runs_the_real_round_and_reports_every_figure(tmp_path) -> None:
    """A small fleet (2 miners x 2 GPUs) through the CLI: every miner verified, every figure present
    (one miners' process: a second one costs CI ~30 s of imports; ``split``/``merge_reports`` are
    tested alone)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "compute", "bench", "fleet", "--miners", "2", "--gpus", "2"]
    command += ["--concurrency", "2", "--sustained-seconds", "4", "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["verified"] == figures["tested"] == 2 and figures["failures"] == []
    for key in (
        "wall_s",
        "cpu_s",
        "cpu_main_s",
        "cpu_pool_s",
        "cpu_clock_s",
        "peak_rss_mb",
        "peak_rss_clock_mb",
    ):
        assert figures[key] > 0, key
    assert figures["ssh_sessions_open_max"] > 0
    assert isinstance(figures["clock_nice"], int)  # the timing process's priority, -10 where permitted
    assert set(figures["loop_lag_ms"]) == {"p50", "p99", "max", "n"} and figures["loop_lag_ms"]["n"] > 0
    assert figures["control_loop_lag_ms"]["n"] > 0 and "max" in figures["gc_pause_ms"]
    assert figures["timing_error_ms"]["n"] == 4  # fp16 and fp32 of both miners
    assert figures["stage_wall_s_per_miner"]["fp16_s"] > 0 and figures["stages_cpu_s"]
    assert figures["verify_jobs_pooled"] > 0 and figures["miners_process"]["errors"] == []
    assert figures["miners_process"]["memory_pass_late_max_s"] >= 0
    assert figures["miners_process"]["request_read_late_max_s"] >= 0
    credited = figures["proofs_credited"]
    assert credited["gemm_fp16_fp32"] == 2 and credited["sustained_runs"] >= 1  # miner 0 is due
    # the timing judges (memory passes, scaling, sustained, host probes) also need the simulated
    # miners to keep pace, which a loaded shared machine may not give them: their answers' maths is
    # checked above, in-process; here only that every credit is counted
    assert set(credited) >= {
        "memory_proven",
        "scaling_all_gpus_credited",
        "host_cpu",
        "host_ram",
        "host_disk",
    }


def test_a_simulated_miner_counts_from_the_requests_arrival_not_its_late_read() -> None:
    """The simulation's own lateness stays out of the validator's timing error (``rxstamp``): a
    request read 200 ms after it arrived is stamped with its arrival, and an unstamped socket says so."""
    import socket
    import time

    from compute.lab.bench.fleet.rxstamp import listening, received_at

    with listening("127.0.0.1", 0) as server:
        server.listen(1)
        with socket.create_connection(server.getsockname()) as client:
            conn, _ = server.accept()
            with conn:
                for _ in range(100):  # the kernel turns receive stamps on lazily (a deferred work item)
                    client.sendall(b"{}\n")
                    assert conn.recv(100) == b"{}\n"
                    if received_at(conn) is not None:
                        break
                    time.sleep(0.01)
                sent = time.monotonic()
                client.sendall(b'{"op":"commit"}\n')
                time.sleep(0.2)  # the busy loop reads it late
                assert conn.recv(100) == b'{"op":"commit"}\n'
                read = time.monotonic()
                arrived = received_at(conn)
                assert arrived is not None and sent <= arrived < sent + 0.05 and read - arrived > 0.19
        with socket.socket() as plain:
            assert received_at(plain) is None


def test_the_simulated_miners_split_over_processes_and_their_reports_join() -> None:
    from compute.lab.bench.fleet.miners import merge_reports, split

    assert split(256, 8) == [range(k, 256, 8) for k in range(8)]  # 16 tested at once: 2 per process
    assert [list(r) for r in split(5, 2)] == [[0, 2, 4], [1, 3]]
    assert [list(r) for r in split(2, 8)] == [[0], [1]] and split(3, 0) == [range(0, 3)]
    first = {"cpu_s": 2.0, "peak_rss_mb": 100.0, "ssh_worker_sessions": 3, "ssh_sessions_open_max": 2,
             "pass_late_max_s": 0.5, "read_late_max_s": 0.1, "timed": [{"op": "commit"}], "errors": ["a"]}  # fmt: skip
    second = {"cpu_s": 1.0, "peak_rss_mb": 50.0, "ssh_worker_sessions": 1, "ssh_sessions_open_max": 1,
              "pass_late_max_s": 0.2, "read_late_max_s": 0.3, "timed": [{"op": "commit_on"}], "errors": []}  # fmt: skip
    merged = merge_reports([first, second, {}])  # a process that died reports nothing
    assert merged == {
        "cpu_s": 3.0, "peak_rss_mb": 150.0, "ssh_worker_sessions": 4, "ssh_sessions_open_max": 3,
        "pass_late_max_s": 0.5, "read_late_max_s": 0.3, "timed": [{"op": "commit"}, {"op": "commit_on"}],
        "errors": ["a"],
    }  # fmt: skip


def test_fleet_bench_refuses_bad_arguments(capsys) -> None:
    from compute.lab.bench.fleet import main

    assert main(["--miners", "0"]) == 2
    assert "--miners must be" in capsys.readouterr().err
    assert main(["--miner-processes", "0"]) == 2
    assert "--miner-processes must be" in capsys.readouterr().err


def test_lines_due_at_one_moment_leave_together() -> None:
    """Every GPU's pass r in one hop (a simulation skew otherwise reads as a late chain), order kept."""
    from compute.lab.bench.fleet.leases import next_due

    lines = iter([(0.1, {"g": 0}), (0.1, {"g": 1}), (0.2, {"g": 0}), (0.2, {"g": 1}), (0.5, {"end": 1})])
    held: list = []
    groups = []
    while group := next_due(lines, held):
        groups.append(group)
    assert groups == [
        [(0.1, {"g": 0}), (0.1, {"g": 1})],
        [(0.2, {"g": 0}), (0.2, {"g": 1})],
        [(0.5, {"end": 1})],
    ]
    assert next_due(iter([]), []) == []


def test_the_simulated_miners_encoder_writes_what_json_dumps_writes() -> None:
    """``encode_line`` copies base64 payloads instead of scanning them; the bytes must not change."""
    vector = np.zeros(1001, dtype=np.uint32)
    vector[[0, 500, 1000]] = [1, 2**32 - 1, 7]
    line = {"ok": True, "op": "memory_open", "text": 'a "quoted"\n\u00e9', "n": [1, 2.5, None, False], "keys": {7: 0, None: 1, False: 2, 2.5: 3},
            "vectors": [array_json(vector, "<u4"), array_json(np.zeros(1001, np.uint32), "<u4")]}  # fmt: skip
    plain = json.loads(json.dumps(line, default=lambda b64: b64.raw.decode("ascii")))
    assert encode_line(line) == json.dumps(plain, separators=(",", ":")).encode() + b"\n"
    decoded = np.frombuffer(base64.b64decode(json.loads(encode_line(line))["vectors"][0]["data"]), "<u4")
    assert np.array_equal(decoded, vector)
    assert isinstance(array_json(np.zeros(3, np.float32), "<f4")["data"], B64)
    rng = np.random.default_rng(7)  # sparse vectors patch the zeros' base64: every tail and group
    for n in (1, 2, 3, 4, 5, 7, 64, 1001):
        for dtype in ("<u4", "<f4"):
            for count in (1, 2, 8, min(n, 65)):
                values = np.zeros(n, dtype=dtype)
                values[rng.choice(n, min(n, count), replace=False)] = rng.integers(1, 2**24, min(n, count))
                assert array_json(values, dtype)["data"].raw == base64.b64encode(values.tobytes()), (n, count)


def test_the_stage_sampler_counts_work_not_a_reader_blocked_on_the_timing_process() -> None:
    """The reader of the timing process's answers waits in ``recv`` inside a compute frame: idle,
    not "ssh" (it was 99 % of the validator process's busy samples); a thread hashing is busy."""
    import hashlib
    import socket
    import threading
    import time

    from compute.lab.bench.fleet.monitor import StackSampler
    from compute.validator.session.clock import _recv_exactly

    reader_end, writer_end = socket.socketpair()
    stop = threading.Event()

    def busy() -> None:
        while not stop.is_set():
            hashlib.sha256(bytes(1 << 16)).digest()

    threads = [
        threading.Thread(target=_recv_exactly, args=(reader_end, 1), daemon=True),
        threading.Thread(target=busy, daemon=True),
    ]
    sampler = StackSampler(interval=0.005)
    for thread in threads:
        thread.start()
    sampler.start()
    time.sleep(0.5)
    sampler.stop()
    stop.set()
    writer_end.sendall(b"x")
    for thread in threads:
        thread.join(5)
    reader_end.close()
    writer_end.close()
    assert sampler.counts and "ssh" not in sampler.counts, sampler.frames
    assert not any("_recv_exactly" in frame for frame in sampler.frames), sampler.frames


def test_the_instruments_count_their_own_cpu_so_the_validators_is_not_inflated_by_a_longer_wall() -> None:
    """The loop-lag timer and the stack sampler cost the validator's process CPU per wall second
    (about 0.035 s/s here): each reports its own, which the round's figure leaves out. The sampler's
    is its thread's; the timer's is the control's identical timer in an idle process."""
    import threading
    import time

    from compute.lab.bench.fleet.monitor import ControlLoop, SpoolWatch, StackSampler

    idle = threading.Event()
    waiting = [threading.Thread(target=idle.wait, daemon=True) for _ in range(8)]
    for thread in waiting:
        thread.start()
    control = ControlLoop()
    sampler, spool = StackSampler(interval=0.001), SpoolWatch(lambda: None, interval=0.001)
    sampler.start()
    spool.start()
    busy_until = time.monotonic() + 1.0
    while time.monotonic() < busy_until:  # this thread's work: not the instruments'
        sum(range(1000))
    sampler.stop()
    spool.stop()
    figures = control.stop()
    idle.set()
    assert sampler.samples > 100 and 0 < sampler.cpu_s < 1.0
    assert 0 < spool.cpu_s < 1.0
    assert figures["n"] > 0 and 0 < figures["cpu_s"] < 1.0
