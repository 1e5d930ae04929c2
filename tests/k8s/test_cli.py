"""`gesscale k8s manifests|submit|run` in-process against the fake API server and the job's HTTP API."""

from __future__ import annotations

import json

import pytest
import yaml

from gesscale.cli import main
from gesscale.k8s.manifests import bundle
from gesscale.k8s.spec import SubmitSpec
from tests.fixtures.k8s import NODES, Fault
from tests.fixtures.paths import ROOT
from tests.k8s.helpers import LMAP, build_cluster, labelled, observation


def _annotate_latencies(api):
    for name, obj in api.objects(NODES).items():
        if name in LMAP.nodes:
            row = {b: LMAP.rtt(name, b) for b in LMAP.names if b != name}
            obj["metadata"]["annotations"] = {"gesscale.io/rtt-ms": json.dumps(row)}
            api.put(NODES, None, obj)


def test_run_recommend_only_prints_the_decision_and_changes_nothing(fake_kube, fake_driver, monkeypatch, capsys):
    build_cluster(fake_kube, fake_driver)
    _annotate_latencies(fake_kube)  # no --latency-map: the map comes from the nodes
    fake_driver.observations[:] = [{**observation(i, backlog=1000 * i), "held_back": True} for i in range(1, 6)]
    monkeypatch.setenv("GESSCALE_JOB_TOKEN", "test-token")
    code = main(["k8s", "run", "--hook-url", fake_driver.url, "--server", fake_kube.url, "--app", "taxi",
                 "--namespace", "fog", "--recommend-only", "--steps", "1", "--period", "0.3"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "up +['n4'] -[] -> ['n1', 'n2', 'n4'] (recommended only)" in out  # back pressure: one more, min ND_max
    assert fake_kube.writes() == [] and fake_driver.hook_calls() == []
    assert labelled(fake_kube) == {"n1", "n2"}


def test_run_without_rights_is_one_line_and_exit_2(fake_kube, fake_driver, capsys):
    build_cluster(fake_kube, fake_driver)
    fake_kube.fault(Fault("GET", "/api/v1/nodes", status=403))
    code = main(["k8s", "run", "--hook-url", fake_driver.url, "--server", fake_kube.url, "--steps", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err == ["gesscale: error: kubernetes: list nodes: forbidden: the controller's service account lacks this "
                   "permission (apply manifests/rbac.yaml) (injected 403)"]


def test_render_and_manifests_write_the_checked_bundle(tmp_path, capsys):
    assert main(["k8s", "render", "-o", str(tmp_path / "job"), "--app", "taxi", "--executors", "3"]) == 0
    expected = bundle(SubmitSpec(app="taxi", executors=3))
    for name, text in expected.items():
        assert (tmp_path / "job" / name).read_text() == text
    assert "kubectl label node <node> gesscale.io/pool=taxi --overwrite" in capsys.readouterr().out
    assert main(["k8s", "manifests", "-o", str(tmp_path / "rbac"), "--live-only"]) == 0
    docs = list(yaml.safe_load_all((tmp_path / "rbac" / "rbac.yaml").read_text()))
    role = next(d for d in docs if d["kind"] == "Role")
    assert [r["resources"] for r in role["rules"]] == [["pods"], ["events"]]


def test_submit_is_a_noted_alias_of_render(tmp_path, capsys):
    """`k8s submit` (the former name) writes the same bundle as `k8s render` and says it submits nothing."""
    assert main(["k8s", "submit", "-o", str(tmp_path / "old")]) == 0
    err = capsys.readouterr().err
    assert "`k8s submit` is now `k8s render`" in err and "submits nothing" in err
    assert main(["k8s", "render", "-o", str(tmp_path / "new")]) == 0
    for name in bundle(SubmitSpec()):
        assert (tmp_path / "old" / name).read_text() == (tmp_path / "new" / name).read_text()


def test_bad_submit_option_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["k8s", "render", "-o", str(tmp_path), "--executor-memory", "lots"]) == 2
    assert capsys.readouterr().err.strip() == (
        "gesscale: error: memory 'lots': expected a number with k, m, g or t (e.g. 1g, 384m)")


def test_run_without_a_token_is_refused_unless_dry(fake_kube, fake_driver, monkeypatch, capsys):
    build_cluster(fake_kube, fake_driver)
    monkeypatch.delenv("GESSCALE_JOB_TOKEN", raising=False)
    code = main(["k8s", "run", "--hook-url", fake_driver.url, "--server", fake_kube.url,
                 "--latency-map", str(ROOT / "inventory/latency/pi10.yaml"), "--steps", "1"])
    assert code == 2
    assert "set GESSCALE_JOB_TOKEN" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--image", "--controller-image"])
def test_an_image_with_a_newline_writes_no_manifest(tmp_path, capsys, flag):
    out = tmp_path / "job"
    assert main(["k8s", "render", "-o", str(out), flag, "gesscale-job:0.1.0\n  command: [sh]"]) == 2
    err = capsys.readouterr().err
    # refused by the command line's control-character check, before the image's name rule would see it
    assert len(err.strip().splitlines()) == 1 and f"'{flag}'" in err and "'gesscale-job:0.1.0\\n" in err, err
    assert not out.exists()
