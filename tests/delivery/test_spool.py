"""The durable spool on its own: FIFO across restarts, acknowledgements, the cap,
damaged segments and a SIGKILL of the writing process."""

from __future__ import annotations

import errno
import logging
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from falcon_gpu.delivery import progress
from falcon_gpu.delivery.segment import MAGIC, Record, read_records
from falcon_gpu.delivery.spool import Spool, SpoolBusy


def open_spool(path: Path, max_bytes: int = 1 << 20) -> tuple[Spool, list[tuple[int, str]], list[str]]:
    evicted: list[tuple[int, str]] = []
    corrupt: list[str] = []
    spool = Spool(
        path,
        max_bytes,
        on_evict=lambda n, m: evicted.append((n, m)),
        on_corrupt=corrupt.append,
        on_unreadable=lambda item: corrupt.append(str(item)),
    )
    return spool, evicted, corrupt


def drain(spool: Spool) -> list[bytes]:
    out = []
    while (entry := spool.next()) is not None:
        out.append(entry.body)
        spool.ack(entry)
    return out


def test_fifo_across_restart_resumes_after_last_ack(tmp_path: Path) -> None:
    spool, _, _ = open_spool(tmp_path)
    for i in range(10):
        spool.append(i + 1, f"batch-{i}".encode())
    first = spool.next()
    assert first is not None and first.body == b"batch-0" and first.samples == 1
    spool.ack(first)
    in_flight = spool.next()  # handed out, never acknowledged: must come back after a restart
    assert in_flight is not None and in_flight.body == b"batch-1"
    spool.close()

    again, _, _ = open_spool(tmp_path)
    assert drain(again) == [f"batch-{i}".encode() for i in range(1, 10)]
    again.append(1, b"newer")
    assert drain(again) == [b"newer"]
    again.close()
    third, _, _ = open_spool(tmp_path)
    assert third.backlog_at_start == 0
    assert drain(third) == []  # the first read takes the directory: a fully acknowledged segment goes
    assert third.size_bytes == 0
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".seg"] == []


def test_cap_drops_oldest_segments_and_counts_their_samples(tmp_path: Path) -> None:
    spool, evicted, _ = open_spool(tmp_path, max_bytes=64 * 1024)
    for i in range(200):  # ~200 KiB into a 64 KiB spool
        spool.append(7, f"{i:04d}".encode() + b"x" * 1000)
    assert spool.size_bytes <= 64 * 1024
    bodies = drain(spool)
    kept = [int(b[:4]) for b in bodies]
    assert kept == list(range(kept[0], 200)), "what is left must be the newest, in order"
    dropped_batches = 200 - len(kept)
    assert dropped_batches > 100
    assert sum(n for n, _ in evicted) == 7 * dropped_batches
    assert all("dropped segment" in m for _, m in evicted)


def test_corrupted_segment_is_skipped_with_a_warning(tmp_path: Path) -> None:
    spool, _, _ = open_spool(tmp_path, max_bytes=64 * 1024)  # 8 KiB segments
    for i in range(40):
        spool.append(1, f"{i:04d}".encode() + b"y" * 900)
    spool.close()
    segments = sorted(p for p in tmp_path.iterdir() if p.suffix == ".seg")
    assert len(segments) >= 3
    contents = [[int(r.payload[4:8]) for r in read_records(p) if isinstance(r, Record)] for p in segments]
    damaged = bytearray(segments[1].read_bytes())
    damaged[len(MAGIC) + 8 + 20] ^= 0xFF  # flip a payload byte of its first record
    segments[1].write_bytes(bytes(damaged))
    segments[2].write_bytes(segments[2].read_bytes()[:-300])  # torn tail

    again, _, corrupt = open_spool(tmp_path, max_bytes=64 * 1024)
    got = [int(b[:4]) for b in drain(again)]
    assert len(corrupt) == 2
    assert "checksum mismatch" in corrupt[0] and "truncated" in corrupt[1]
    torn_keeps = contents[2][:-1]  # the tear cut into its last record only
    expected = contents[0] + torn_keeps + [i for seg in contents[3:] for i in seg]
    assert got == expected, "the damaged segment is skipped, the torn one read up to the tear"


def test_records_survive_sigkill_of_the_writer(tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import os, signal, sys
        from pathlib import Path
        from falcon_gpu.delivery.spool import Spool, SpoolBusy
        spool = Spool(Path({str(tmp_path)!r}), 1 << 20, on_evict=lambda n, m: None, on_corrupt=print,
                      on_unreadable=print)
        for i in range(50):
            spool.append(3, b"rec-%d" % i)
        print("written", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL and b"written" in proc.stdout
    spool, _, corrupt = open_spool(tmp_path)
    assert drain(spool) == [b"rec-%d" % i for i in range(50)]
    assert corrupt == []


def test_a_long_replay_logs_its_progress(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(progress, "PROGRESS_EVERY", 0.0)
    caplog.set_level(logging.INFO, logger="falcon_gpu.delivery")
    replay = progress.ReplayProgress("rw", backlog=2000)
    replay.step(1500)
    replay.step(0)
    replay.done()
    replay.done()  # caught up already: says nothing more
    assert [r.message for r in caplog.records][:2] == [
        "sink rw: replaying the spool: 1 batches sent, 1500 bytes left",
        "sink rw: replaying the spool: 2 batches sent, 0 bytes left",
    ]
    assert len(caplog.records) == 3
    assert caplog.records[2].message.startswith("sink rw: spool replayed: 2 batches in ")


def test_size_counts_only_what_is_not_acknowledged(tmp_path: Path) -> None:
    spool, _, _ = open_spool(tmp_path)
    assert spool.size_bytes == 0
    for _ in range(4):
        spool.append(1, b"z" * 100)
    full = spool.size_bytes
    assert full == len(MAGIC) + 4 * (8 + 4 + 100)
    first = spool.next()
    assert first is not None
    spool.ack(first)
    assert spool.size_bytes == full - len(MAGIC) - 112
    spool.close()
    again, _, _ = open_spool(tmp_path)
    assert again.backlog_at_start == 3 * 112
    drain(again)
    again.append(1, b"y")
    drain(again)
    assert again.size_bytes == 0, "the segment still being written is fully acknowledged"


def test_a_write_that_fails_part_way_costs_only_that_batch(tmp_path: Path) -> None:
    """Disk full in the middle of a record: the torn bytes must not hide the batches after it."""
    spool, _, corrupt = open_spool(tmp_path)
    spool.append(1, b"before")
    real = spool._writer._fh

    class FullDisk:  # the segment's file; the disk fills up half-way through the next write, once
        full = True

        def write(self, data: bytes) -> int:
            assert real is not None
            if not self.full:
                return int(real.write(data))
            self.full = False
            real.write(bytes(data)[: len(data) // 2])
            if hasattr(real, "flush"):
                real.flush()
            raise OSError(errno.ENOSPC, "No space left on device")

        def __getattr__(self, name: str) -> object:
            return getattr(real, name)

    spool._writer._fh = FullDisk()  # type: ignore[assignment]
    with pytest.raises(OSError):
        spool.append(1, b"lost-" + b"x" * 100)
    spool.append(1, b"after-1")
    spool.append(1, b"after-2")
    assert drain(spool) == [b"before", b"after-1", b"after-2"]
    spool.close()
    again, _, corrupt_again = open_spool(tmp_path)
    again.append(1, b"next-start")
    assert drain(again) == [b"next-start"]
    assert corrupt == corrupt_again == []


def test_one_process_owns_a_spool_and_a_reader_next_to_it_changes_nothing(tmp_path: Path) -> None:
    """``doctor`` (or a ``run --once``) next to the running agent, same spool_dir: the agent's
    live segment must not be deleted, and a second writer must not interleave with it."""
    agent, _, _ = open_spool(tmp_path)
    agent.append(1, b"one")
    assert drain(agent) == [b"one"]  # caught up: the ledger points at the end of the live segment
    live = sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".seg")

    doctor, _, _ = open_spool(tmp_path)  # builds the sink, never sends
    assert doctor.backlog_at_start == 0 and doctor.size_bytes == 0
    doctor.close()
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".seg") == live

    once, _, _ = open_spool(tmp_path)
    with pytest.raises(SpoolBusy, match="in use by another falcon-gpu process"):
        once.append(1, b"from a second process")
    with pytest.raises(SpoolBusy):
        once.next()
    agent.append(1, b"two")
    assert drain(agent) == [b"two"]
    agent.close()
    once.append(1, b"three")  # the owner is gone: the directory can be taken now
    assert drain(once) == [b"three"]
    once.close()


def test_a_filesystem_without_locks_still_spools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from falcon_gpu.delivery import spool as spool_module

    def no_locks(fd: int, op: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(spool_module.fcntl, "flock", no_locks)
    spool, _, _ = open_spool(tmp_path)
    spool.append(1, b"kept")
    assert drain(spool) == [b"kept"]
    spool.close()


def test_an_unreadable_segment_is_set_aside_not_deleted_even_by_the_cap(tmp_path: Path) -> None:
    """A directory of a segment's name (what no open() can read, even as root): the spool goes on
    with the segments after it, and neither the reader nor the cap deletes it."""
    spool, _, _ = open_spool(tmp_path, max_bytes=64 * 1024)  # 8 KiB segments
    for i in range(24):
        spool.append(1, f"{i:04d}".encode() + b"z" * 900)
    spool.close()
    segments = sorted(p for p in tmp_path.iterdir() if p.suffix == ".seg")
    lost = {int(r.payload[4:8]) for r in read_records(segments[0]) if isinstance(r, Record)}
    segments[0].unlink()
    segments[0].mkdir()
    (segments[0] / "keep").write_text("still here")

    again, _, problems = open_spool(tmp_path, max_bytes=64 * 1024)
    got = [int(b[:4]) for b in drain(again)]
    assert got == [i for i in range(24) if i not in lost]
    (problem,) = problems
    assert "Is a directory" in problem and segments[0].name in problem
    assert (tmp_path / (segments[0].name + ".unreadable") / "keep").read_text() == "still here"
    for _ in range(100):  # past the cap: only real segments are evicted
        again.append(1, b"w" * 900)
    assert (tmp_path / (segments[0].name + ".unreadable") / "keep").exists()
    again.close()
