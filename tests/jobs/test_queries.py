"""The query contract (jobs/query.py): `--query` values loaded or refused with one line before Spark starts, and
the example query of docs/queries.md run by the job from a temporary folder."""

from __future__ import annotations

import json
import math
import random
import re
from pathlib import Path
from typing import Any

import pytest

from gesscale.cli import main
from gesscale.errors import UserError
from jobs.query import load_query
from tests.jobs import ridegen

DOC = Path(__file__).resolve().parents[2] / "docs" / "queries.md"


def example_query() -> str:
    """The first Python block of docs/queries.md."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert blocks, "docs/queries.md has no python example"
    return blocks[0]


def test_built_in_queries_load_with_their_names() -> None:
    assert load_query("nearest-landmark").name == "nearest-landmark"
    routes = load_query("frequent-routes")
    assert routes.name == "frequent-routes" and "window" in routes.output_key
    assert load_query("jobs.queries.frequent_routes:build").build is routes.build


def test_a_file_loads_by_path_with_or_without_the_function(tmp_path: Path) -> None:
    path = tmp_path / "to_jfk.py"
    path.write_text(example_query())
    q = load_query(str(path))
    assert (q.name, q.output_key) == ("to-jfk", "the ride record's key")
    assert load_query(f"{path}:build").name == "to-jfk"


@pytest.mark.parametrize(("body", "suffix", "words"), [
    (None, "", "no such file"),
    ("def build(rides):\n    return rides\n", ":missing", "no function 'missing'"),
    ("def build(rides, extra):\n    return rides\n", "", "exactly one argument"),
    ("def build():\n    return None\n", "", "exactly one argument"),
    ("build = 3\n", "", "not a function"),
    ("def build(rides:\n", "", "SyntaxError"),
    ("import no_such_module_xyz\n", "", "ModuleNotFoundError"),
])
def test_a_bad_query_value_is_one_line_and_exit_2_before_spark(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                body: str | None, suffix: str, words: str) -> None:
    path = tmp_path / "q.py"
    if body is not None:
        path.write_text(body)
    with pytest.raises(UserError, match=re.escape(words)):
        load_query(f"{path}{suffix}")
    # the CLI: no broker at this address, so getting exit 2 with the query's message proves nothing else ran
    code = main(["job", "run", "--bootstrap", "127.0.0.1:1", "--checkpoint", str(tmp_path / "ck"),
                 "--query", f"{path}{suffix}"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and words in err and len(err.splitlines()) == 1


def test_an_unknown_name_lists_the_built_in_queries() -> None:
    with pytest.raises(UserError, match="frequent-routes"):
        load_query("frequent-rootes")


def near_jfk(rec: dict) -> bool:
    """The example's predicate, computed here from the record."""
    return math.sqrt((rec["dropoff_lon"] + 73.7781) ** 2 + (rec["dropoff_lat"] - 40.6413) ** 2) <= 0.02


@pytest.mark.e2e
def test_the_documented_example_runs_from_a_temporary_folder(spark_local: Any, kafka_bootstrap: str,
                                                             kafka_topic_factory: Any, tmp_path: Path) -> None:
    from kafka import KafkaProducer

    from jobs.job import JobConfig, JobState, start_query

    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (folder / "to_jfk.py").write_text(example_query())
    inp, out, dlq = (kafka_topic_factory(partitions=2, prefix=p) for p in ("in", "out", "dlq"))
    rnd = random.Random(5)
    recs = []
    for i in range(3000):
        rec = ridegen.ride(i, rnd)
        rec["dropoff_lon"], rec["dropoff_lat"] = -73.80 + rnd.random() * 0.05, 40.62 + rnd.random() * 0.05
        recs.append(rec)
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    for i, rec in enumerate(recs):
        producer.send(inp, value=json.dumps(rec).encode(), partition=i % 2)
    producer.send(inp, value=b"not json", partition=0)  # a bad record: dead-lettered by the job, unseen by the query
    producer.flush()
    producer.close()
    cfg = JobConfig(bootstrap=kafka_bootstrap, input=inp, output=out, dead_letter=dlq, checkpoint=tmp_path / "ck",
                    available_now=True, max_rows_per_batch=1000, query=f"{folder / 'to_jfk.py'}:build")
    state = JobState()
    query = start_query(spark_local, cfg, state)
    query.awaitTermination(600)
    assert not query.isActive and query.exception() is None
    want = {r["key"]: r for r in recs if near_jfk(r)}
    assert 100 < len(want) < len(recs)
    got = {k.decode(): json.loads(v) for k, v in ridegen.read_all(kafka_bootstrap, out)}
    assert sorted(got) == sorted(want)
    for key, body in got.items():
        assert body == {f: want[key][f] for f in ("ride_id", "pickup_time", "dropoff_time", "distance_mi")}
    assert [json.loads(v)["reason"] for _, v in ridegen.read_all(kafka_bootstrap, dlq)] == [
        "not a JSON object with the expected field types"]


def test_the_task_sampler_reads_a_real_drivers_stages(spark_local: Any, tmp_path: Path) -> None:
    """benchmarks/spark_tasks.py `sample` against this module's SparkSession's UI (tests/test_spark_tasks.py has the
    rest): every task of the newest completed stage, once."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import spark_tasks

    spark_local.sparkContext.parallelize(range(300), 3).map(lambda x: x * 2).count()
    out = tmp_path / "tasks.jsonl"
    spark_tasks.sample(spark_local.sparkContext.uiWebUrl, out, every_s=0.01, stages=1, polls=2)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 1  # the second poll sees the same stage: not written again
    assert len(lines[0]["tasks"]) == 3
    assert all(t["ms"] >= 0 and t["host"] for t in lines[0]["tasks"])
