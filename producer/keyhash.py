"""Kafka's default key partitioning (murmur2 of the key bytes, as the Java client and kafka-python), one key at a
time or a whole chunk of keys at once with numpy.

The bulk form exists because kafka-python's murmur2 is pure Python (~3 µs per key): for the synthetic trace,
where every ride has a new key, that alone was a tenth of the producer's time per record. Both forms give the
same numbers as `kafka.partitioner.default.murmur2` (a test checks it).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from kafka.partitioner.default import murmur2

_SEED = 0x9747B28C
_M = 0x5BD1E995


def key_hash(key: bytes) -> int:
    """The non-negative murmur2 of `key` (partition = key_hash % number of partitions, over sorted ids)."""
    return murmur2(key) & 0x7FFFFFFF


def key_partition(key: bytes, partitions: list[int]) -> int:
    """The partition Kafka's default partitioner (Java and kafka-python alike) gives `key`: murmur2 of the key
    modulo the number of partitions, over the sorted partition ids."""
    return partitions[key_hash(key) % len(partitions)]


def key_hashes(keys: Sequence[bytes]) -> list[int]:
    """`key_hash` of every key, computed with numpy (keys grouped by length; uint32 arithmetic wraps as Java's)."""
    out = np.zeros(len(keys), dtype=np.uint32)
    lengths = np.fromiter(map(len, keys), dtype=np.int64, count=len(keys))
    for length in np.unique(lengths).tolist():
        same = lengths == length
        if same.all():  # the usual case (ids of one chunk): no regrouping
            rows: slice | np.ndarray = slice(None)
            joined = b"".join(keys)
        else:
            rows = np.flatnonzero(same)
            joined = b"".join([keys[i] for i in rows.tolist()])
        data = np.frombuffer(joined, dtype=np.uint8).reshape(int(same.sum()), length)
        out[rows] = _murmur2_fixed(data.astype(np.uint32), length)
    return (out & np.uint32(0x7FFFFFFF)).tolist()


def _murmur2_fixed(data: np.ndarray, length: int) -> np.ndarray:
    """murmur2 of each row of `data` (uint32 values of bytes, all rows `length` long)."""
    m = np.uint32(_M)
    h = np.full(data.shape[0], (_SEED ^ length) & 0xFFFFFFFF, dtype=np.uint32)
    for i in range(length // 4):
        k = data[:, 4 * i] | (data[:, 4 * i + 1] << 8) | (data[:, 4 * i + 2] << 16) | (data[:, 4 * i + 3] << 24)
        k = k * m
        k ^= k >> np.uint32(24)
        k = k * m
        h = (h * m) ^ k
    tail = length & ~3
    extra = length % 4
    if extra >= 3:
        h ^= data[:, tail + 2] << 16
    if extra >= 2:
        h ^= data[:, tail + 1] << 8
    if extra >= 1:
        h ^= data[:, tail]
        h = h * m
    h ^= h >> np.uint32(13)
    h = h * m
    h ^= h >> np.uint32(15)
    return h
