"""WAN emulation on the SSH fleet: the netem role and the fabric path apply one plan; pings hit the right class.

This kernel has no netem (docs/wan-emulation.md), so the tree is applied in structural mode (pfifo leaves) and
checked by htb class counters; on a kernel with netem the probe test checks the netem path instead.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gesscale.cli import main
from gesscale.errors import UserError
from gesscale.latency_map import load_latency_map
from netem.hosts import hosts_for_map, load_inventory
from netem.playbooks import run_playbook
from netem.remote import FabricRemote
from netem.service import NetemService

ROOT = Path(__file__).resolve().parents[2]
INVENTORY = ROOT / "inventory" / "local"
MAP = ROOT / "inventory" / "latency" / "local.yaml"


@pytest.fixture
def service(fleet):
    lmap = load_latency_map(MAP)
    remote = FabricRemote()
    svc = NetemService(hosts_for_map(load_inventory(INVENTORY), lmap), lmap, remote, "structural")
    try:
        yield svc
    finally:
        svc.clear()
        remote.close()


def _roots(fleet) -> dict[str, str]:
    return {h.name: fleet.ssh(h, "/usr/sbin/tc qdisc show dev eth0").stdout for h in fleet.hosts}


def _role(state: str, mode: str = "structural", map_path: Path = MAP):
    return run_playbook("netem", INVENTORY, extra_vars={
        "netem_latency_map": str(map_path), "netem_mode": mode, "netem_state": state,
        "netem_hosts": "gs-h1,gs-h2,gs-h3"})  # fmt: skip


@pytest.mark.e2e
def test_role_builds_the_tree_and_each_ping_hits_its_peer_class(fleet, service):
    first = _role("present")
    assert first.ok, first.failures
    assert set(first.recap) == {"gs-h1", "gs-h2", "gs-h3"}
    assert all(r.changed > 0 for r in first.recap.values()), first.changes
    for host, qdiscs in _roots(fleet).items():
        assert "qdisc htb 1: root" in qdiscs and qdiscs.count("qdisc pfifo") == 2, host

    hits = service.check_classes(count=3)
    assert sorted((h.src, h.dst) for h in hits) == sorted(
        (a, b) for a in ("gs-h1", "gs-h2", "gs-h3") for b in ("gs-h1", "gs-h2", "gs-h3") if a != b
    )
    assert all(h.ok for h in hits), [h for h in hits if not h.ok]

    again = _role("present")
    assert again.ok and again.changed == 0, again.changes
    # One plan for both paths: fabric finds the role's tree and recorded script already in place.
    assert service.apply() == {"gs-h1": False, "gs-h2": False, "gs-h3": False}

    cleared = _role("absent")
    assert cleared.ok, cleared.failures
    assert all("htb" not in q for q in _roots(fleet).values())


@pytest.mark.e2e
def test_fabric_apply_is_idempotent_and_measure_gives_a_full_matrix(fleet, service, tmp_path):
    assert service.apply() == {"gs-h1": True, "gs-h2": True, "gs-h3": True}
    assert service.apply() == {"gs-h1": False, "gs-h2": False, "gs-h3": False}
    verdict = service.measure(count=3)
    matrix = verdict.matrix(service.lmap.names)
    assert all(isinstance(matrix[a][b], float) for a in matrix for b in matrix if a != b)
    assert len(verdict.pairs) == 6 and all(p.loss_pct == 0 for p in verdict.pairs)
    assert not verdict.ok  # no delay on this kernel: achieved << requested, and the verdict says so

    out = tmp_path / "rtt.json"
    code = main(["netem", "measure", "-i", str(INVENTORY), "-m", str(MAP), "--count", "2", "--json", str(out)])
    assert code == 1
    doc = json.loads(out.read_text())
    assert doc["ok"] is False
    assert all(doc["achieved_ms"][a][b] is not None for a in doc["names"] for b in doc["names"] if a != b)

    report = tmp_path / "ansible-rtt.json"
    played = run_playbook("measure", INVENTORY, extra_vars={
        "netem_latency_map": str(MAP), "measure_count": 2, "measure_output": str(report)})  # fmt: skip
    assert played.ok, played.failures
    achieved = json.loads(report.read_text())["matrix"]
    assert all(achieved[a][b] is not None for a in achieved for b in achieved if a != b)


@pytest.mark.e2e
def test_bad_map_or_missing_netem_touch_no_host(fleet, service, tmp_path, capsys):
    ghost = tmp_path / "ghost.yaml"
    ghost.write_text("nodes: {gs-h1: {}, gs-h2: {}, gs-h9: {}}\ndefault_rtt_ms: 10\n")
    assert main(["netem", "apply", "-i", str(INVENTORY), "-m", str(ghost), "--mode", "structural"]) == 2
    assert "gs-h9 not in" in capsys.readouterr().err
    via_role = _role("present", map_path=ghost)
    assert not via_role.ok and any("gs-h9" in f for f in via_role.failures)
    assert all("htb" not in q for q in _roots(fleet).values())

    results = service.probe()
    netem_service = NetemService(service.hosts, service.lmap, service.remote, "netem")
    if all(r.netem for r in results):  # a kernel with netem: the real leaves go in
        netem_service.apply()
        assert all("netem delay" in q for q in _roots(fleet).values())
        return
    with pytest.raises(UserError) as err:
        netem_service.apply()
    for r in results:
        assert (r.host in str(err.value)) == (not r.netem)
    role = _role("present", mode="netem")
    assert not role.ok and any("netem is missing" in f for f in role.failures)
    assert all("htb" not in q for q in _roots(fleet).values())
