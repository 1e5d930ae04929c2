"""gesscale: fog testbed and latency-aware autoscaler for stream processing on edge clusters."""

__version__ = "0.1.0"
