"""``cluster check``'s bridge from an SSH session to the proof's blocking channel (fast: no SSH).

The whole check runs over real leases in ``test_cluster.py`` (slow)."""

from __future__ import annotations

import asyncio

import compute.operator.cluster_check as cluster_check
from compute.operator.cluster_check import SshChannel


class Stream:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = list(chunks)

    async def read(self, _n: int) -> bytes:
        await asyncio.sleep(0)
        return self.chunks.pop(0) if self.chunks else b""


class Writer:
    def __init__(self) -> None:
        self.written = bytearray()

    def is_closing(self) -> bool:
        return False

    def write(self, data: bytes) -> None:
        self.written += data


class Process:
    def __init__(self, out: list[bytes], err: list[bytes]) -> None:
        self.stdout, self.stderr, self.stdin = Stream(out), Stream(err), Writer()


async def _lines(out: list[bytes], err: list[bytes] = ()) -> tuple[list[bytes], SshChannel, Process]:
    process = Process(out, list(err))
    channel = SshChannel("lease:22", process, asyncio.get_running_loop())  # type: ignore[arg-type]
    got: list[bytes] = []
    while True:
        line = await asyncio.to_thread(channel.readline)
        got.append(line)
        if not line:
            return got, channel, process


async def test_lines_split_and_joined_across_reads_come_out_whole_and_end_with_an_empty_one() -> None:
    got, channel, process = await _lines(
        [b'{"a":', b'1}\n{"b":2}\n{"c"', b":3}\n", b"tail"], [b"Trace", b"x\nboom\n"]
    )
    assert got == [b'{"a":1}\n', b'{"b":2}\n', b'{"c":3}\n', b""]  # an unterminated tail is no line
    assert channel.stderr_tail.decode().splitlines()[-1] == "boom"
    channel.send('{"kind": "x"}\n')
    await asyncio.sleep(0.01)
    assert bytes(process.stdin.written) == b'{"kind": "x"}\n'


async def test_a_line_past_the_limit_is_cut_and_what_follows_still_reads(monkeypatch) -> None:
    monkeypatch.setattr(cluster_check, "MAX_LINE_BYTES", 100)
    got, _, _ = await _lines([b"x" * 60, b"x" * 60, b"x" * 10 + b"\nok\n"])
    assert got[0] == b"x" * 101  # cut past the limit: the proof drops it as a bad line
    assert got[-2:] == [b"ok\n", b""]


def _report(passed: bool) -> cluster_check.CheckReport:
    from compute.interconnect import InterconnectVerdict

    failures = () if passed else ("rank 1 (127.0.0.1:22): opening 3 differs",)
    verdict = InterconnectVerdict(passed, 0.5, 4 << 20, 0.008 if passed else 0.0, failures, 0.001)
    return cluster_check.CheckReport(verdict, 4 << 20, 4 << 20, None)


def test_each_verdict_is_kept_and_the_latest_is_the_books(tmp_path) -> None:
    from compute.operator import LeaseBook

    book = LeaseBook(tmp_path / "leases.db")
    assert cluster_check.keep_link(book, "c1", _report(True))
    assert cluster_check.keep_link(book, "c1", _report(False))
    kept = book.last_link("c1")
    assert kept is not None and not kept.passed and kept.bandwidth_gbs == 0.0
    assert kept.failures == ("rank 1 (127.0.0.1:22): opening 3 differs",)


def test_a_book_that_cannot_be_written_costs_the_verdict_nothing(tmp_path, monkeypatch, caplog) -> None:
    """A full disk under the book: logged, and the caller still has its verdict to act on."""
    import sqlite3

    from compute.operator import LeaseBook

    book = LeaseBook(tmp_path / "leases.db")

    def full(_record: object) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(book, "add_link", full)
    assert not cluster_check.keep_link(book, "c1", _report(True))
    assert "not kept in the book: database or disk is full" in caplog.text
