"""Live scaling through the driver's hook on a real Spark standalone cluster (master + two 1-core workers):
add an executor on a chosen worker host, remove the executor of the other host, while the query runs; every
record is still written exactly once."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.jobs import ridegen
from tests.jobs.jobproc import JobProcess, observations, wait_for

TOKEN = "e2e-hook-token"
HOOK_PORT = 18094


def hook(method: str, path: str, body: dict | None = None) -> dict:
    req = urllib.request.Request(f"http://127.0.0.1:{HOOK_PORT}{path}", method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(req, timeout=180) as resp:
        return json.load(resp)


@pytest.mark.e2e
def test_hook_adds_on_a_chosen_host_and_removes_another_while_exactly_once_holds(
        spark_standalone: Any, kafka_bootstrap: str, kafka_topic_factory: Any, tmp_path: Path) -> None:
    inp, out, dlq = (kafka_topic_factory(partitions=4, prefix=p) for p in ("in", "out", "dlq"))
    first_part = 40_000
    good = ridegen.produce(kafka_bootstrap, inp, first_part, partitions=4)
    metrics = tmp_path / "metrics.jsonl"
    job = JobProcess(
        ["--bootstrap", kafka_bootstrap, "--input", inp, "--output", out, "--dead-letter", dlq,
         "--checkpoint", str(tmp_path / "ck"), "--master", spark_standalone.url, "--executors", "1",
         "--driver-host", "127.0.0.1", "--http-port", str(HOOK_PORT), "--ui-port", "14070",
         "--max-rows-per-batch", "4000", "--max-rows-per-range", "1000", "--metrics-jsonl", str(metrics),
         "--stop-when-idle-s", "8"],
        tmp_path / "job.log", env={"GESSCALE_JOB_TOKEN": TOKEN})
    try:
        wait_for(lambda: len(observations(metrics)) >= 1, 300, "the first batch", job)
        status = hook("GET", "/executors")
        assert len(status["executors"]) == 1, status
        first_host = status["executors"][0]["host"]
        other = next(h for h in spark_standalone.worker_hosts if h != first_host)

        # with the warm-up: the stream keeps to the first executor until the new one has run the warm-up job
        added = hook("POST", "/executors/add", {"host": other, "wait_s": 120, "warm": True})
        assert added["on_requested_host"] is True, added
        assert added["warm"]["ok"] is True and added["warm"]["tasks"] == 2, (added["warm"], job.log.read_text()[-4000:])
        assert sorted(e["host"] for e in added["executors"]) == sorted(spark_standalone.worker_hosts)
        warmed = hook("POST", "/executors/warm", {})  # the real warm-up job, next to the running query
        assert warmed["ok"] is True and warmed["tasks"] == 2, warmed
        assert warmed["records"] == 200 and warmed["rows"] == 2 * 200, warmed  # re-read, never written

        removed = hook("POST", "/executors/remove", {"host": first_host, "wait_s": 60})
        assert removed["gone"] is True, removed
        assert [e["host"] for e in removed["executors"]] == [other]
        assert removed["target"] == 1
        assert job.running(), "the query must survive the reconfiguration"
        # more input after the change, so batches certainly run on the new executor alone
        seen = len(observations(metrics))
        good |= ridegen.produce(kafka_bootstrap, inp, 20_000, partitions=4, first=first_part)
        wait_for(lambda: any(o["executors"] and all(e["host"] == other for e in o["executors"])
                             for o in observations(metrics)[seen:]), 300, "a batch on the new executor only", job)
        assert job.wait(600) == 0, job.log.read_text()[-3000:]
    finally:
        if job.running():
            job.kill9()
    keys = [k for k, _ in ridegen.read_all(kafka_bootstrap, out)]
    assert len(keys) == len(good) == 60_000
    assert set(keys) == good
