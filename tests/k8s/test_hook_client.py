"""The driver-hook client against the job's own HTTP API (jobs/http_api.py) served by the fake driver."""

from __future__ import annotations

import pytest

from gesscale.errors import UserError
from jobs.hook_client import HookError, HttpDriverHook
from tests.fixtures.k8s import NODES, TOKEN, free_port, node
from tests.k8s.helpers import build_cluster


def test_observation_is_none_before_the_first_batch(fake_kube, fake_driver):
    assert HttpDriverHook(fake_driver.url, None).observation() is None


def test_target_and_executors_round_trip(fake_kube, fake_driver):
    build_cluster(fake_kube, fake_driver, running=())
    fake_kube.put(NODES, None, node("n3", {"gesscale.io/pool": "taxi"}))
    hook = HttpDriverHook(fake_driver.url, TOKEN)
    hook.set_target(1)
    (ex,) = hook.executors()["executors"]
    assert ex["id"] == "1" and ex["host"].startswith("10.42.")  # on Kubernetes the host is the pod IP


def test_wrong_token_and_no_answer_are_clear_errors(fake_kube, fake_driver):
    with pytest.raises(HookError, match="HTTP 401") as err:
        HttpDriverHook(fake_driver.url, "nope").executors()
    assert err.value.status == 401
    silent = HttpDriverHook(f"http://127.0.0.1:{free_port()}", TOKEN, attempts=2, backoff_s=0.01)
    with pytest.raises(HookError, match="no answer") as err:
        silent.set_target(2)
    assert err.value.status is None


def test_url_must_be_http():
    with pytest.raises(UserError, match="http://"):
        HttpDriverHook("driver:4041", TOKEN)


def test_spark_still_starting_is_retried(fake_kube, fake_driver):
    build_cluster(fake_kube, fake_driver, running=())
    fake_kube.put(NODES, None, node("n3", {"gesscale.io/pool": "taxi"}))
    ready_hook, fake_driver.driver_api.hook = fake_driver.driver_api.hook, None  # the job answers 503 until set

    def spark_comes_up(_seconds):
        fake_driver.driver_api.hook = ready_hook

    HttpDriverHook(fake_driver.url, TOKEN, sleep=spark_comes_up).set_target(1)
    assert [c[1] for c in fake_driver.hook_calls()] == ["/executors/target", "/executors/target"]
    assert [e["id"] for e in fake_driver.executors()] == ["1"]
