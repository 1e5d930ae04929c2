"""The pure-Python reference of the enrichment, which the job's output is checked against."""

from __future__ import annotations

import json
import math

from jobs.landmarks import LANDMARKS

ADDED = ("nearest_landmark", "landmark_distance")


def reference_nearest(lon: float, lat: float) -> tuple[str, float]:
    """Pure-Python reference: the landmark with the smallest Euclidean distance in degrees (first wins a tie)."""
    best_name, best_d = "", math.inf
    for lm in LANDMARKS:
        d = math.sqrt((lon - lm.lon) ** 2 + (lat - lm.lat) ** 2)
        if d < best_d:
            best_name, best_d = lm.name, d
    return best_name, best_d


def check_enriched(rec: dict, key: bytes, value: bytes) -> str:
    """Assert that (key, value) is `rec` enriched as the reference says; returns the landmark's name."""
    out = json.loads(value)
    name, dist = reference_nearest(rec["pickup_lon"], rec["pickup_lat"])
    assert key == rec["key"].encode()
    assert out["nearest_landmark"] == name, rec
    assert abs(out["landmark_distance"] - dist) <= 1e-9
    assert {k: v for k, v in out.items() if k not in ADDED} == rec  # every input field, unchanged
    return name
