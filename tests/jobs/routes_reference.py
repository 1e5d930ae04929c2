"""A plain-Python DEBS 2015 Query 1 (no Spark), which the `frequent-routes` query's output is checked against.

Written from the challenge's definition (Jerzak & Ziekow, DEBS 2015), not from the Spark query: integer
seconds since the epoch, cells by dividing the offset from the grid's north-west corner by the cell size,
hopping windows [k*slide - window + slide, ...) enumerated per ride, counts in dicts, one sort per window.

"A window that closes": a window [start, end) closes when the watermark reaches its end, end <= the largest
event time of all records read (in the grid or not) minus the watermark delay. Only such windows are
compared; the Spark query writes exactly those (append mode), once each.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime

FIRST_CELL_CENTRE = (41.474937, -74.913585)  # lat, lon of cell 1.1
STEP_LAT, STEP_LON = 0.004491556, 0.005986  # 500 m south, 500 m east
GRID = 300


def cell(lon: float | None, lat: float | None) -> tuple[int, int] | None:
    """(east number, south number) of the 500 m cell holding the point, both 1..300; None outside the grid."""
    if lon is None or lat is None:
        return None
    lat0, lon0 = FIRST_CELL_CENTRE
    east = math.floor((lon - (lon0 - STEP_LON / 2)) / STEP_LON) + 1
    south = math.floor(((lat0 + STEP_LAT / 2) - lat) / STEP_LAT) + 1
    if 1 <= east <= GRID and 1 <= south <= GRID:
        return east, south
    return None


def epoch_s(text: str) -> int:
    """`YYYY-MM-DDTHH:MM:SS` read as UTC, in whole seconds since 1970."""
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


def iso(seconds: int) -> str:
    """Inverse of `epoch_s`."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")


def window_ends(t: int, window_s: int, slide_s: int) -> list[int]:
    """Ends of every window [end - window_s, end) holding t, ends being multiples of slide_s."""
    first = (t // slide_s + 1) * slide_s  # the smallest end > t
    return list(range(first, t + window_s + 1, slide_s))


def top_routes(records: Iterable[dict], window_s: int = 1800, slide_s: int = 300, delay_s: int = 300,
               top: int = 10) -> dict[str, list[dict]]:
    """{window end: ranked routes} for every window that closes (module docstring) and has a route.

    `records`: parsed ride records (dicts of the producer's fields). Ranking: count descending, latest dropoff
    descending, then start and end cell numbers ascending."""
    counts: dict[int, dict[tuple[int, int, int, int], list[int]]] = defaultdict(dict)
    latest_event = None
    for rec in records:
        t = epoch_s(rec["event_time"])
        latest_event = t if latest_event is None else max(latest_event, t)
        start, end = cell(rec["pickup_lon"], rec["pickup_lat"]), cell(rec.get("dropoff_lon"), rec.get("dropoff_lat"))
        if start is None or end is None:
            continue
        route = (*start, *end)
        for w in window_ends(t, window_s, slide_s):
            seen = counts[w].setdefault(route, [0, t])
            seen[0] += 1
            seen[1] = max(seen[1], t)
    if latest_event is None:
        return {}
    watermark = latest_event - delay_s
    out: dict[str, list[dict]] = {}
    for w, routes in counts.items():
        if w > watermark:
            continue
        ranked = sorted(routes.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[0]))[:top]
        out[iso(w)] = [{"rank": i + 1, "start_cell": f"{r[0]}.{r[1]}", "end_cell": f"{r[2]}.{r[3]}", "count": n,
                        "last_dropoff": iso(last)} for i, (r, (n, last)) in enumerate(ranked)]
    return out
