"""Autoscaling policies: one interface, one registry (see `registry`)."""
