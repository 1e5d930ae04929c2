"""The job's record logic as Spark column expressions: parse the input JSON, say why a record is bad, enrich.

Everything here is evaluated inside the JVM (no Python UDF), so the only Python on the record path is the
Kafka source and the Kafka writer. A record is good when its value is a JSON object whose fields have the
producer's types, the required fields are present, `event_time` is `YYYY-MM-DDTHH:MM:SS`, and the pickup point
is a finite longitude/latitude. Bad records carry a `reason` and go to the dead-letter topic.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from jobs.landmarks import LANDMARKS, Landmark

CORRUPT = "_corrupt"
INPUT_SCHEMA = StructType(
    [
        StructField("key", StringType()),
        StructField("ride_id", StringType()),
        StructField("dup", LongType()),
        StructField("event_time", StringType()),
        StructField("pickup_time", StringType()),
        StructField("dropoff_time", StringType()),
        StructField("pickup_lon", DoubleType()),
        StructField("pickup_lat", DoubleType()),
        StructField("dropoff_lon", DoubleType()),
        StructField("dropoff_lat", DoubleType()),
        StructField("trip_time_s", LongType()),
        StructField("distance_mi", DoubleType()),
        StructField("medallion", StringType()),
        StructField(CORRUPT, StringType()),
    ]
)
FIELDS = [f.name for f in INPUT_SCHEMA.fields if f.name != CORRUPT]
REQUIRED = ("key", "ride_id", "event_time", "pickup_lon", "pickup_lat")
EVENT_TIME_FORMAT = "yyyy-MM-dd'T'HH:mm:ss"


def parse(raw: DataFrame) -> DataFrame:
    """Source rows (partition, offset, key, value bytes, ...) → the same plus `r` (the parsed struct)."""
    text = F.col("value").cast("string")
    opts = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT, "allowNonNumericNumbers": "false"}
    return raw.withColumn("text", text).withColumn("r", F.from_json("text", INPUT_SCHEMA, opts))


def reason() -> Column:
    """Why a parsed record is rejected, or null when it is good (first failing check wins)."""
    r = F.col("r")
    expr = F.when(F.col("value").isNull(), F.lit("empty value"))
    expr = expr.when(r.isNull() | r[CORRUPT].isNotNull(), F.lit("not a JSON object with the expected field types"))
    for name in REQUIRED:
        expr = expr.when(r[name].isNull(), F.lit(f"missing field {name}"))
    expr = expr.when(F.try_to_timestamp(r["event_time"], F.lit(EVENT_TIME_FORMAT)).isNull(),
                     F.lit("event_time is not YYYY-MM-DDTHH:MM:SS"))
    lon, lat = r["pickup_lon"], r["pickup_lat"]
    expr = expr.when(F.isnan(lon) | F.isnan(lat) | (F.abs(lon) > 180) | (F.abs(lat) > 90),
                     F.lit("pickup point is not a longitude/latitude"))
    return expr


def _distance(lm: Landmark) -> Column:
    r = F.col("r")
    return F.sqrt((r["pickup_lon"] - F.lit(lm.lon)) ** 2 + (r["pickup_lat"] - F.lit(lm.lat)) ** 2)


def enrich() -> tuple[Column, Column]:
    """(name, distance) of the nearest landmark to the pickup point; ties go to the earlier landmark."""
    dists = [_distance(lm) for lm in LANDMARKS]
    best = F.least(*dists)
    name = None
    for lm, d in zip(LANDMARKS, dists, strict=True):
        name = F.when(d == best, F.lit(lm.name)) if name is None else name.when(d == best, F.lit(lm.name))
    return name, best


def classify(raw: DataFrame, topic: str) -> DataFrame:
    """Source rows → `partition, offset, reason, key, enriched, dead`.

    A good record has a null `reason`, is keyed by its unique `key` and carries `enriched` (its fields plus
    `nearest_landmark` and `landmark_distance`). A bad one carries `dead` (reason, where it was read, raw text)
    and is keyed by where it was read, `topic/partition/offset`, which is unique too.
    """
    parsed = parse(raw).withColumn("reason", reason())
    name, dist = enrich()
    good = F.col("reason").isNull()
    enriched = F.struct(*[F.col("r")[f].alias(f) for f in FIELDS], name.alias("nearest_landmark"),
                        dist.alias("landmark_distance"))
    dead = F.struct(F.col("reason"), F.lit(topic).alias("topic"), F.col("partition"), F.col("offset"),
                    F.col("text").alias("raw"))
    origin = F.concat_ws("/", F.lit(topic), F.col("partition").cast("string"), F.col("offset").cast("string"))
    return parsed.select(
        "partition",
        "offset",
        "reason",
        F.when(good, F.col("r")["key"]).otherwise(origin).alias("key"),
        F.when(good, enriched).alias("enriched"),
        F.when(~good, dead).alias("dead"),
    )


def as_messages(classified: DataFrame) -> DataFrame:
    """Classified rows → `partition, reason, key, value` (key and JSON value as UTF-8 bytes) for the writer."""
    value = F.when(F.col("reason").isNull(), F.to_json("enriched")).otherwise(F.to_json("dead"))
    return classified.select("partition", "reason", F.col("key").cast("binary").alias("key"),
                             value.cast("binary").alias("value"))
