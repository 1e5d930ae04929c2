"""Least privilege of the local testbed, tried against a running one (1 fog node, the job with one executor).

"From another address": a network namespace joined to this machine by a veth pair (10.217.N.2 inside, 10.217.N.1
on this side) is another host as far as the kernel is concerned: it has its own interfaces and its own loopback,
and reaches this machine only at 10.217.N.1, as a machine on the LAN would reach its address. A second 127.0.0.x
address would prove nothing: a socket bound to 127.0.0.1 accepts connections from any 127/8 source. The positive
control (a listener on 0.0.0.0 answers from the namespace) shows that the path works, so a refusal means the
endpoint is not there for other hosts.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from gesscale.testbed import Testbed, TestbedConfig
from gesscale.testbed.cgroups import process_tree
from gesscale.testbed.fleet import FleetPorts
from gesscale.testbed.job import JobSettings
from jobs import spark_security

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces and cgroups need root")

PORTS = FleetPorts(master=15577, master_ui=15578, worker_base=15600, worker_ui_base=15650)
HTTP_PORT, UI_PORT, KAFKA_PORT = 15580, 15540, 15593


def _run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=60)


@pytest.fixture(scope="module")
def outside() -> Iterator[tuple[str, str]]:
    """A network namespace on a veth pair; yields (namespace, this machine's address as seen from it)."""
    n = os.getpid() % 250 + 1
    ns, veth = f"gs17sec{os.getpid()}", f"gs17s{os.getpid() % 100000}"
    here, there = f"10.217.{n}.1", f"10.217.{n}.2"
    try:
        _run("ip", "netns", "add", ns)
        _run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
        _run("ip", "addr", "add", f"{here}/30", "dev", veth)
        _run("ip", "link", "set", veth, "up")
        _run("ip", "netns", "exec", ns, "ip", "addr", "add", f"{there}/30", "dev", "eth0")
        _run("ip", "netns", "exec", ns, "ip", "link", "set", "eth0", "up")
        _run("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
        yield ns, here
    finally:
        _run("ip", "link", "del", veth, check=False)
        _run("ip", "netns", "del", ns, check=False)


@pytest.fixture(scope="module")
def testbed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    """A secured testbed: one fog node, the job on it (its own ports, clear of the other tests')."""
    run_dir = tmp_path_factory.mktemp("least-privilege") / "tb"
    cfg = TestbedConfig(run_dir=run_dir, nodes=["fog8"], node_cpu=0.5, kafka_port=KAFKA_PORT, ports=PORTS,
                        job=JobSettings(bootstrap="", http_port=HTTP_PORT, ui_port=UI_PORT, bp_window_s=5.0))
    tb = Testbed.up(cfg)
    try:
        yield tb
    finally:
        tb.close()


def _spark_pids(tb: Testbed) -> set[int]:
    """Every process of the testbed's Spark side: master, workers, executors, the job (driver) and their children."""
    roots = [tb.fleet.state.master_pid, *tb.fleet.state.workers.values(), tb.job.settings.pid]
    return {p for r in roots if r for p in process_tree(r)}


def _listeners(pids: set[int]) -> list[tuple[str, int, int]]:
    """(address, port, pid) of every TCP listening socket those processes hold (`ss -ltnpH`)."""
    out = []
    for line in _run("ss", "-ltnpH").stdout.splitlines():
        cols = line.split()
        local, users = cols[3], " ".join(cols[5:])
        addr, _, port = local.rpartition(":")
        for pid in {int(p.split("=")[1]) for p in users.replace(")", ",").split(",") if p.startswith("pid=")}:
            if pid in pids:
                out.append((addr.strip("[]").removeprefix("::ffff:"), int(port), pid))
    return out


def _connect_from(ns: str, host: str, ports: list[int]) -> dict[int, str]:
    """Connect from inside the namespace to host:port for each port: 'refused', 'open' or the error's name."""
    code = ("import json,socket,sys\nr={}\nfor p in map(int,sys.argv[2:]):\n s=socket.socket();s.settimeout(5)\n"
            " try:\n  s.connect((sys.argv[1],p));r[p]='open'\n except ConnectionRefusedError:\n  r[p]='refused'\n"
            " except OSError as e:\n  r[p]=type(e).__name__\n finally:\n  s.close()\nprint(json.dumps(r))")
    res = _run("ip", "netns", "exec", ns, sys.executable, "-c", code, host, *map(str, ports))
    return {int(k): v for k, v in json.loads(res.stdout).items()}


@pytest.mark.e2e
def test_every_spark_endpoint_and_the_hook_are_loopback_only(testbed: Testbed,
                                                             outside: tuple[str, str]) -> None:
    ns, here = outside
    listeners = _listeners(_spark_pids(testbed))
    ports = sorted({port for _, port, _ in listeners})
    print(f"\nlisteners of the testbed's Spark processes: {sorted(set(listeners))}", flush=True)
    expected = {PORTS.master, PORTS.master_ui, PORTS.worker_base, PORTS.worker_ui_base, HTTP_PORT, UI_PORT}
    assert expected <= set(ports), "the master, worker, their UIs, the driver UI and the hook must be among them"
    assert all(addr.startswith("127.") for addr, _, _ in listeners), listeners
    assert 6066 not in ports  # no REST submission server
    with socket.socket() as rest:  # nothing on the master's address at the REST port either
        rest.settimeout(2)
        assert rest.connect_ex(("127.0.0.1", 6066)) != 0
    with socket.create_server(("0.0.0.0", 0)) as control:  # positive control: the path from outside works
        results = _connect_from(ns, here, [control.getsockname()[1], *ports, 6066])
    print(f"from {ns} to {here}: {results}", flush=True)
    assert results.pop(next(iter(results))) == "open"
    assert set(results.values()) == {"refused"}, results


def _http(url: str, method: str = "GET", headers: dict[str, str] | None = None) -> tuple[int, str]:
    req = urllib.request.Request(url, method=method, headers=headers or {}, data=b"" if method == "POST" else None)
    try:
        with urllib.request.urlopen(req, timeout=20) as resp:
            return resp.status, resp.read().decode(errors="replace")
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")


@pytest.mark.e2e
def test_no_kill_links_no_secret_in_sight_and_the_hook_wants_its_token(testbed: Testbed) -> None:
    master_ui = f"http://127.0.0.1:{PORTS.master_ui}"
    app = json.loads(_http(f"{master_ui}/json/")[1])["activeapps"][0]["id"]
    _http(f"{master_ui}/app/kill/?id={app}&terminate=true", "POST")
    _http(f"http://127.0.0.1:{UI_PORT}/stages/stage/kill/?id=0&terminate=true", "POST")
    time.sleep(2)
    assert [a["id"] for a in json.loads(_http(f"{master_ui}/json/")[1])["activeapps"]] == [app]
    assert testbed.job.alive()
    status, _ = _http(f"{master_ui}/workers/kill/?host=127.0.0.38", "POST")
    print(f"\nmaster UI: worker decommissioning answered {status}", flush=True)
    assert status in (403, 405), status  # decommissioning from the UI is denied
    assert json.loads(_http(f"{master_ui}/json/")[1])["aliveworkers"] == 1
    # the hook: no token, a wrong token, a token without "Bearer "
    hook = f"http://127.0.0.1:{HTTP_PORT}/executors"
    token = testbed.job.settings.token
    assert _http(hook)[0] == 401
    assert _http(hook, headers={"Authorization": "Bearer " + "0" * len(token)})[0] in (401, 403)
    # the secret: 0600 in a 0700 folder, on no command line, in no log, redacted by the UI
    conf = spark_security.conf_dir(testbed.fleet.run_dir)
    assert (conf.stat().st_mode & 0o777, (conf / "spark-defaults.conf").stat().st_mode & 0o777) == (0o700, 0o600)
    secret = next(line.split()[1] for line in (conf / "spark-defaults.conf").read_text().splitlines()
                  if line.startswith("spark.authenticate.secret "))
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            assert secret.encode() not in (proc / "cmdline").read_bytes(), proc
    for path in testbed.fleet.run_dir.rglob("*"):
        if path.is_file() and conf not in path.parents:
            with contextlib.suppress(OSError):
                assert secret.encode() not in path.read_bytes(), path
    driver = f"http://127.0.0.1:{UI_PORT}/api/v1/applications"
    app_id = json.loads(_http(driver)[1])[0]["id"]
    env = _http(f"{driver}/{app_id}/environment")[1]
    assert "spark.authenticate.secret" in env and secret not in env


def _intruder(master_url: str, conf: dict[str, str], log: Path) -> subprocess.Popen:
    """A PySpark driver that tries to register an application with the master (no access to the run's conf)."""
    code = ("import sys\nfrom pyspark.sql import SparkSession\nb=SparkSession.builder.master(sys.argv[1])"
            ".appName('intruder').config('spark.ui.enabled','false').config('spark.driver.host','127.0.0.1')\n"
            "for kv in sys.argv[2:]:\n k,v=kv.split('=',1);b=b.config(k,v)\nb.getOrCreate().range(1).count()\n"
            "print('REGISTERED',flush=True)")
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_CONF_DIR", "_SPARK_AUTH_SECRET")}
    with log.open("wb") as fh:
        return subprocess.Popen([sys.executable, "-c", code, master_url, *[f"{k}={v}" for k, v in conf.items()]],
                                stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)


@pytest.mark.e2e
def test_a_client_without_the_secret_cannot_register(testbed: Testbed, tmp_path: Path) -> None:
    from jobs.standalone import start_worker

    master_log = testbed.fleet.run_dir / "master" / "master.log"
    # how the master's handshake refuses a client without SASL (the plain driver, the rogue worker), and one
    # whose secret differs
    marks = ("Expected SaslMessage, received something else", "DIGEST-MD5: digest response format violation")

    def refused() -> list[int]:
        text = master_log.read_text(errors="replace")
        return [text.count(m) - b for m, b in zip(marks, before, strict=True)]

    before = [0, 0]
    before = refused()
    intruders = [_intruder(testbed.fleet.state.master_url, {}, tmp_path / "plain.log"),
                 _intruder(testbed.fleet.state.master_url,
                           {"spark.authenticate": "true", "spark.authenticate.secret": "wrong"}, tmp_path / "w.log")]
    # a worker without the secret tries to offer an executor slot
    rogue = start_worker(testbed.fleet.state.master_url, "127.0.0.39", PORTS.worker_base + 9, PORTS.worker_ui_base + 9,
                         tmp_path / "rogue")
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # until the master has refused both kinds of client
            if refused()[0] >= 2 and refused()[1] >= 1:
                break
            time.sleep(1)
        time.sleep(5)  # the registration a refused handshake would have carried has had its chance
        state = json.loads(_http(f"http://127.0.0.1:{PORTS.master_ui}/json/")[1])
        print(f"\nmaster after the intruders: {len(state['activeapps'])} app(s) "
              f"{[a['name'] for a in state['activeapps']]}, {state['aliveworkers']} worker(s)", flush=True)
        assert [a["name"] for a in state["activeapps"]] != [] and \
            all(not a["name"].startswith("intruder") for a in state["activeapps"])
        assert [w["host"] for w in state["workers"] if w["state"] == "ALIVE"] == ["127.0.0.38"]
        for p, log in zip(intruders, ("plain.log", "w.log"), strict=True):
            text = (tmp_path / log).read_text(errors="replace")
            assert "REGISTERED" not in text and "Failed to connect to master" in text, text[-2000:]
            assert p.poll() in (None, 1)
        assert refused()[0] >= 2 and refused()[1] >= 1, refused()
        assert "Failed to connect to master" in rogue.log.read_text(errors="replace")
    finally:
        rogue.stop()
        for p in intruders:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, 9)
            p.wait(30)
