"""`frequent-routes`: the ten most frequent routes of the last 30 minutes, a shuffle by route and windowed state.

# DEBS 2015 Grand Challenge, Query 1 (Jerzak & Ziekow, "The DEBS 2015 Grand Challenge", DEBS 2015).

A route is (start cell, end cell) on the challenge's grid: 300 x 300 squares of 500 m, cell 1.1 centred at
41.474937 N, 74.913585 W, the first number growing eastwards, the second southwards (500 m = 0.005986 degrees of
longitude, 0.004491556 of latitude, the challenge's figures). A ride with either end outside the grid, or
without a dropoff point, is ignored. Event time is the trace's `event_time`, the dropoff time.

Windowing and output mode, and why. The challenge's window slides with every ride and its output is the top 10
each time it changes; Structured Streaming has no such operator, so the last 30 minutes are approximated by
hopping windows: [start, start + 30 min) for every start that is a multiple of `SLIDE` (5 min) since the epoch.
Output mode is **append**: a window's top 10 is written once, when the window closes, i.e. when the watermark
(the largest event time seen in earlier micro-batches minus `DELAY`) reaches its end. Append gives one final
record per window with a unique key (the window's end), which is what exactly-once by keys needs; update mode
would rewrite a window's ranking on every trigger under the same key.

Two chained stateful aggregations: counts per (window, route) with each route's latest dropoff, then per window
the routes sorted by count (descending), latest dropoff (descending: the fresher route first, as the challenge's
solutions ranked ties), then cell numbers (ascending), cut at 10. Records are counted as they arrive (a ride the
producer sends three times counts three times).
"""

from __future__ import annotations

from typing import Any

NAME = "frequent-routes"
OUTPUT_KEY = "the window's end, YYYY-MM-DDTHH:MM:SS (UTC, the trace's clock)"
ORIGIN_LAT, ORIGIN_LON = 41.474937, -74.913585  # centre of cell 1.1
CELL_LAT, CELL_LON = 0.004491556, 0.005986  # 500 m south, 500 m east
CELLS = 300
NORTH, WEST = ORIGIN_LAT + CELL_LAT / 2, ORIGIN_LON - CELL_LON / 2  # the grid's north-west corner
WINDOW_S, SLIDE_S, DELAY_S = 30 * 60, 5 * 60, 5 * 60
TOP = 10


def _cell(lon: Any, lat: Any) -> tuple[Any, Any]:
    """(x, y) cell numbers of a point, 1-based, as Spark columns (out of the grid: outside 1..CELLS)."""
    from pyspark.sql import functions as F

    return (F.floor((lon - F.lit(WEST)) / F.lit(CELL_LON)) + 1, F.floor((F.lit(NORTH) - lat) / F.lit(CELL_LAT)) + 1)


def _in_grid(*cells: Any) -> Any:
    from pyspark.sql import functions as F

    cond = F.lit(True)
    for c in cells:
        cond = cond & c.between(1, CELLS)
    return cond


def build(rides: Any) -> Any:
    """The top-10 routes per closed 30-minute window (module docstring)."""
    from pyspark.sql import functions as F

    sx, sy = _cell(F.col("pickup_lon"), F.col("pickup_lat"))
    ex, ey = _cell(F.col("dropoff_lon"), F.col("dropoff_lat"))
    located = rides.select(
        # `event_time` is validated YYYY-MM-DDTHH:MM:SS; read as UTC whatever the session's zone
        F.to_timestamp(F.concat(F.col("event_time"), F.lit("Z")), "yyyy-MM-dd'T'HH:mm:ssX").alias("dropoff_ts"),
        sx.alias("sx"), sy.alias("sy"), ex.alias("ex"), ey.alias("ey"),
    ).withWatermark("dropoff_ts", f"{DELAY_S} seconds")  # every ride moves the watermark, in the grid or not
    # one predicate that reads the event time too: Spark pushes filters that do not below the watermark, and
    # the rides outside the grid would then no longer move it
    in_grid = F.when(F.col("dropoff_ts").isNotNull(), _in_grid(F.col("sx"), F.col("sy"), F.col("ex"), F.col("ey")))
    counts = (
        located.where(in_grid)
        .groupBy(F.window("dropoff_ts", f"{WINDOW_S} seconds", f"{SLIDE_S} seconds"), "sx", "sy", "ex", "ey")
        .agg(F.count(F.lit(1)).alias("n"), F.max("dropoff_ts").alias("last"))
    )
    ranked = (
        # one SLIDE-long window around each 30-minute window's last instant: one group per 30-minute window
        counts.groupBy(F.window(F.window_time("window"), f"{SLIDE_S} seconds").alias("w"))
        .agg(F.sort_array(F.collect_list(F.struct(
            (-F.col("n")).alias("neg_n"), (-F.unix_micros("last")).alias("neg_last"),
            "sx", "sy", "ex", "ey", "n", "last"))).alias("routes"))
    )
    end = F.col("w.end")
    start = end - F.expr(f"INTERVAL {WINDOW_S} SECONDS")
    fmt = "yyyy-MM-dd'T'HH:mm:ss"
    routes = F.transform(F.slice("routes", 1, TOP), lambda r, i: F.struct(
        (i + 1).alias("rank"),
        F.concat_ws(".", r["sx"], r["sy"]).alias("start_cell"),
        F.concat_ws(".", r["ex"], r["ey"]).alias("end_cell"),
        r["n"].alias("count"),
        F.date_format(r["last"], fmt).alias("last_dropoff"),
    ))
    return ranked.select(
        F.date_format(end, fmt).alias("key"),
        F.to_json(F.struct(F.date_format(start, fmt).alias("window_start"), F.date_format(end, fmt).alias("window_end"),
                           routes.alias("routes"))).alias("value"),
    )
