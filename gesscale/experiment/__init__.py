"""Experiments a researcher can publish: one spec file, one command, one bundle (`gesscale experiment run`).

- `spec`: the experiment file (environment, latency map, workload, policies, seeds, durations, options), read
  strictly;
- `bundle`: runs it in the simulator and writes the bundle (resolved spec, provenance, time series, decision
  log, metrics, figures, report.html);
- `replay`: runs a simulator bundle again (`gesscale experiment replay`) and checks that it reproduces;
- `paper`: the reproduction of the paper's Table III with its published numbers as a reference row;
- `html`: the self-contained report.
"""
