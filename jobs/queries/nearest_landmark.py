"""`nearest-landmark`: each ride with the nearest of three NYC landmarks to its pickup point (a per-record map).

The enrichment itself is `jobs.records.enrich` (plain Python, msgspec): the output value is the ride's JSON
text with `nearest_landmark` and `landmark_distance` spliced in before its closing brace, keyed by the ride's
unique `key`. It runs in one `mapInArrow` over the rides' `value`; `partition` is kept, so each output row
goes to the output partition of its input partition.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

NAME = "nearest-landmark"
OUTPUT_KEY = "the ride record's unique key"
PER_RECORD = True  # one output row per good ride, keyed by its key: exactly once is checked on the output
OUTPUT_SCHEMA = "partition int, key binary, value binary"


def enrich_batches(batches: Iterator[Any]) -> Iterator[Any]:
    """`mapInArrow` body: (partition, value) of good rides → (partition, key, enriched value)."""
    import pyarrow as pa

    from jobs.records import enrich

    schema = pa.schema([("partition", pa.int32()), ("key", pa.binary()), ("value", pa.binary())])
    for batch in batches:
        keys: list[bytes] = []
        values: list[bytes] = []
        for value in batch.column("value").to_pylist():
            key, out = enrich(value)
            keys.append(key)
            values.append(out)
        yield pa.RecordBatch.from_arrays([batch.column("partition"), pa.array(keys, pa.binary()),
                                          pa.array(values, pa.binary())], schema=schema)


def build(rides: Any) -> Any:
    """The rides enriched with their nearest landmark (module docstring)."""
    return rides.select("partition", "value").mapInArrow(enrich_batches, OUTPUT_SCHEMA)
