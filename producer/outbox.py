"""The MQTT producer's durable outbox: every record published, on disk by its unique key, until confirmed end to end.

A PUBACK from mosquitto is not durable: it saves its queues in snapshots (`autosave_interval`), so `kill -9`
or a power cut loses what it acknowledged since the last one, and a subscription it had not yet saved is gone
too. So the producer keeps each record here (SQLite, one row per key) from the moment it publishes it, and
drops a row only when the record is found in the Kafka topic by key in the final verification. Until then the
record is published again after every lost connection (once a bridge has subscribed again), and after the
producer itself was killed the next run with the same client id finds the rows and publishes them again.

Rows are written in batches (`flush`), at least every time the sink is serviced: a producer killed between two
flushes forgets the records of that moment, which `--resume` regenerates from the deterministic schedule.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from gesscale.errors import UserError


class Outbox:
    """Records published and not yet confirmed, by id (the producer key), in one SQLite file."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS outbox (id BLOB PRIMARY KEY, value BLOB NOT NULL, added REAL NOT NULL)"
            )
        except (OSError, sqlite3.Error) as err:
            raise UserError(f"cannot open the MQTT outbox {self.path}: {err}") from None
        self._buffer: list[tuple[bytes, bytes, float]] = []

    def add(self, rid: bytes, value: bytes) -> None:
        """Remember one record (written at the next `flush`)."""
        self._buffer.append((rid, value, time.time()))

    def flush(self) -> None:
        """Write the buffered records (one transaction); a record already held keeps its first time."""
        if not self._buffer:
            return
        rows, self._buffer = self._buffer, []
        with self._db:
            self._db.execute("BEGIN")
            self._db.executemany("INSERT OR IGNORE INTO outbox (id, value, added) VALUES (?, ?, ?)", rows)

    def confirm(self, ids: Iterable[bytes]) -> int:
        """Drop the rows of records confirmed end to end; returns how many were dropped."""
        self.flush()
        batch = [(rid,) for rid in ids]
        if not batch:
            return 0
        before = self.count()
        with self._db:
            self._db.execute("BEGIN")
            self._db.executemany("DELETE FROM outbox WHERE id = ?", batch)
        return before - self.count()

    def count(self) -> int:
        """Records not yet confirmed."""
        self.flush()
        return int(self._db.execute("SELECT COUNT(*) FROM outbox").fetchone()[0])

    def oldest(self) -> float | None:
        """Wall time the oldest unconfirmed record was added, or None when there is none."""
        self.flush()
        row = self._db.execute("SELECT MIN(added) FROM outbox").fetchone()
        return None if row[0] is None else float(row[0])

    def ids(self) -> set[bytes]:
        """The ids of every unconfirmed record."""
        self.flush()
        return {bytes(r[0]) for r in self._db.execute("SELECT id FROM outbox")}

    def unconfirmed(self) -> Iterator[tuple[bytes, bytes]]:
        """(id, value) of every unconfirmed record, oldest first."""
        self.flush()
        rows = self._db.execute("SELECT id, value FROM outbox ORDER BY added").fetchall()
        return ((bytes(rid), bytes(value)) for rid, value in rows)

    def close(self, *, remove_if_empty: bool = True) -> None:
        """Write what is buffered and close; an empty outbox leaves no file behind."""
        self.flush()
        empty = self.count() == 0
        self._db.close()
        if remove_if_empty and empty:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)
