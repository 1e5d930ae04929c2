"""Node state from raw node objects, and the latency map the nodes carry in their annotations."""

from __future__ import annotations

import json

import pytest

from gesscale.errors import UserError
from gesscale.k8s.nodes import latency_map_from_nodes, parse_node
from gesscale.k8s.retry import RetryPolicy, should_retry
from tests.fixtures.k8s import node


def test_ready_cordoned_and_tainted_nodes():
    assert parse_node(node("a")).state.schedulable
    assert not parse_node(node("b", ready=False)).state.schedulable
    assert parse_node(node("c", unschedulable=True)).state.cordoned
    tainted = parse_node(node("d", taints=[{"key": "pi/overheat", "effect": "NoSchedule"}]))
    assert tainted.blocking_taints == ("pi/overheat:NoSchedule",) and tainted.state.cordoned
    soft = parse_node(node("e", taints=[{"key": "x", "effect": "PreferNoSchedule"}]))
    assert soft.state.schedulable  # a preference does not keep executors away


def _annotated(name, rtts=None, **extra):
    obj = node(name)
    ann = {f"gesscale.io/{k}": str(v) for k, v in extra.items()}
    if rtts is not None:
        ann["gesscale.io/rtt-ms"] = json.dumps(rtts)
    obj["metadata"]["annotations"] = ann
    return parse_node(obj)


def test_latency_map_from_annotations():
    nodes = [_annotated("a", {"b": 10, "c": 40}, region="umea", lat=63.8, lon=20.3),
             _annotated("b", {"c": 35}), _annotated("c")]
    lmap = latency_map_from_nodes(nodes)
    assert lmap.rtt("a", "b") == 10 and lmap.rtt("b", "c") == 35 and lmap.rtt("c", "a") == 40
    assert lmap.nodes["a"].region == "umea" and lmap.nodes["a"].lat == 63.8


def test_no_annotation_means_no_map_and_gaps_are_errors():
    assert latency_map_from_nodes([_annotated("a"), _annotated("b")]) is None
    # The server carries no annotation and no peer names it: it stays out of the map (never chosen).
    lmap = latency_map_from_nodes([_annotated("a", {"b": 5}), _annotated("b"), _annotated("server")])
    assert lmap.names == ["a", "b"]
    with pytest.raises(UserError, match=r"missing RTT for pair \(a, c\)"):
        latency_map_from_nodes([_annotated("a", {"b": 5}), _annotated("b"), _annotated("c", {})])
    lmap = latency_map_from_nodes([_annotated("a", {"b": 5}), _annotated("b"), _annotated("c", {})], default_rtt_ms=50)
    assert lmap.rtt("a", "c") == 50


@pytest.mark.parametrize("raw, message", [("{oops", "not JSON"), ("[1, 2]", "JSON object"),
                                          ('{"zz": 3}', "unknown node 'zz'"), ('{"b": -1}', r"\(a, b\)")])
def test_bad_annotations_name_the_node(raw, message):
    a = _annotated("a")
    a.annotations["gesscale.io/rtt-ms"] = raw
    with pytest.raises(UserError, match=message):
        latency_map_from_nodes([a, _annotated("b")])


def test_retry_only_what_is_safe():
    assert should_retry(None, True) and should_retry(409, True) and should_retry(503, True)
    assert not should_retry(403, True) and not should_retry(404, True) and not should_retry(422, True)
    assert not should_retry(None, False) and not should_retry(503, False)
    policy = RetryPolicy(backoff_s=0.5, max_backoff_s=2)
    assert [policy.delay(i) for i in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 2.0]
