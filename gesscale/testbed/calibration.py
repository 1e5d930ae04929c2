"""`gesscale calibrate --backend local`: bring up a testbed, measure each configuration's MST with the capacity
probe on the real job, fit the model, tear everything down (also on Ctrl-C).

The testbed gets exactly the fog nodes the configurations use (workers start only where an executor runs).
Configurations are measured from the most replicas to the fewest, each reached from the previous by the local
backend's `live` strategy: a scale-down takes a fraction of a second, while a scale-up starts a worker and an
executor JVM and its Python workers inside a small CPU budget (~40 s at 0.25 core, measured here), so the
largest configuration starts with the job and the others follow by removals. Results are reported in the order
the configurations were given. Before the first configuration the job is kept saturated for at least
`job_warmup_s` and until its micro-batches stop getting faster (at most three times as long):
here its micro-batches at 3 nodes shortened from ~3.8 s to ~1.5 s over its first ~90 s (JIT warm-up), and a
configuration measured cold came out at half its later throughput.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gesscale.errors import UserError
from gesscale.latency_map import LatencyMap
from gesscale.probe import Calibration, ProbeParams, ProbeResult, calibrate


@dataclass
class LocalCalibrationOptions:
    """The testbed a live calibration brings up (the probe's own knobs are a `ProbeParams`)."""

    run_dir: Path = Path("out/calibrate")
    node_cpu: float = 0.25
    max_rows_per_batch: int = 2000
    partitions: int = 6
    port_shift: int = 0  # added to every default port of the testbed (two testbeds side by side)
    job_warmup_s: float = 45.0  # the job saturated this long before the first configuration (JIT warm-up)
    wan: bool = True  # emulate the map between the nodes and the site (gesscale.testbed.wan)
    site: str | None = None  # node of the map hosting broker and driver; None: gesscale.testbed.wan_plan.choose_site
    query: str = "nearest-landmark"  # the job's `--query` (docs/queries.md)

    def validate(self) -> None:
        """UserError for values the testbed cannot run with."""
        if not 0 < self.node_cpu <= 1:
            raise UserError("--node-cpu must be in (0, 1] cores")
        if self.max_rows_per_batch < 10:
            raise UserError("--max-rows-per-batch must be at least 10")
        if self.job_warmup_s < 0:
            raise UserError("--job-warmup-s must be >= 0")
        if not 0 <= self.port_shift <= 800:
            raise UserError("--port-shift must be between 0 and 800 (ports stay in 15000-15999)")


def testbed_nodes(lmap: LatencyMap, configs: Sequence[tuple[str, ...]]) -> list[str]:
    """Every node some configuration uses, in map order."""
    used = {n for cfg in configs for n in cfg}
    return [n for n in lmap.names if n in used]


def measuring_order(configs: Sequence[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """Most replicas first (stable for equal counts): later configurations are reached by removals."""
    return sorted(configs, key=lambda c: -len(c))


def calibrate_local(opts: LocalCalibrationOptions, lmap: LatencyMap, configs: Sequence[tuple[str, ...]],
                    params: ProbeParams, progress: Callable[[ProbeResult], None] | None = None,
                    say: Callable[[str], None] = print,
                    on_step: Callable[[dict[str, float]], None] | None = None,
                    form: str = "paper", latency: str = "nd_max") -> tuple[Calibration, dict[str, float]]:
    """Measure `configs` on a fresh local testbed and fit the model in `form`, its points in `latency` (`site`:
    the farthest replica's RTT to the testbed's site, which needs the WAN emulated); returns the calibration and
    timings (s).

    The testbed (broker, master, workers, job, cgroups) is torn down before returning, whatever happens.
    """
    from gesscale.testbed import KAFKA_PORT, Testbed, TestbedConfig
    from gesscale.testbed.backend import LocalBackend
    from gesscale.testbed.fleet import FleetPorts
    from gesscale.testbed.job import JobSettings
    from gesscale.testbed.probe_target import LocalProbeTarget
    from gesscale.testbed.wan import WanSettings

    opts.validate()
    if latency == "site" and not opts.wan:
        raise UserError("a calibration in latency site needs the WAN emulated (its site): drop --no-wan")
    if not configs:
        raise UserError("no configuration to measure")
    t_start = time.monotonic()
    run_dir = Path(opts.run_dir).resolve()
    if (run_dir / "testbed.json").exists():
        raise UserError(f"a testbed seems to run in {run_dir} (testbed.json present); stop it or use --run-dir")
    if run_dir.exists():
        shutil.rmtree(run_dir)
    given = list(configs)
    configs = measuring_order(configs)
    names = testbed_nodes(lmap, configs)
    shift = opts.port_shift
    settings = JobSettings(bootstrap="", max_rows_per_batch=opts.max_rows_per_batch,
                           http_port=15080 + shift, ui_port=15040 + shift, query=opts.query)
    ports = FleetPorts(15077 + shift, 15078 + shift, 15100 + shift, 15200 + shift)
    say(f"bringing up the testbed in {run_dir}: {len(names)} fog nodes ({', '.join(names)}) at "
        f"{opts.node_cpu:g} core, the job ({opts.query}) on {', '.join(configs[0])} ...")
    tb = Testbed.up(TestbedConfig(run_dir=run_dir, nodes=names, initial=list(configs[0]), node_cpu=opts.node_cpu,
                                  job=settings, partitions=opts.partitions, kafka_port=KAFKA_PORT + shift,
                                  ports=ports, wan=WanSettings(lmap, opts.site) if opts.wan else None))
    timings = {"setup_s": time.monotonic() - t_start}
    target = None
    try:
        backend = LocalBackend(tb.fleet, tb.job, lmap.subset(names), strategy="live", wan=tb.wan)
        target = LocalProbeTarget(backend, say=say)
        if opts.job_warmup_s > 0:
            t_warm = time.monotonic()
            say(f"  warming the job up: saturated for at least {opts.job_warmup_s:.0f} s, until its batches are "
                "steady ...")
            sent = target.warm_up(opts.job_warmup_s)
            timings["job_warmup_s"] = time.monotonic() - t_warm
            say(f"  warm-up done: {sent} records in {timings['job_warmup_s']:.0f} s")
        t_probe = time.monotonic()
        cal = calibrate(target, lmap, configs, params, progress=progress, on_step=on_step, form=form,
                        latency=latency, site=tb.wan.site if tb.wan is not None else None)
        timings["probe_s"] = time.monotonic() - t_probe
        cal.results.sort(key=lambda r: given.index(tuple(r.nodes)))
    finally:
        if target is not None:
            target.close()
        say("tearing the testbed down")
        tb.close()
    timings["total_s"] = time.monotonic() - t_start
    return cal, timings
