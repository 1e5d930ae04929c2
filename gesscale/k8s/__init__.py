"""Spark on Kubernetes (k3s): manifests and spark settings, a small API adapter, the driver hook client and
the `k8s` backend that puts executors on the nodes the controller chooses (see docs/kubernetes.md)."""
