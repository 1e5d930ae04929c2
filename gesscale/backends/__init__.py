"""Backends the controller drives: simulator, local testbed, Kubernetes."""
