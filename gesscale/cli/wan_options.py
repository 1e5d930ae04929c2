"""The testbed's WAN-emulation flags, declared once for `demo`, `run` and `calibrate` (gesscale.testbed.wan)."""

from __future__ import annotations

from typing import Any

import typer

WAN_HELP = ("Emulate the latency map's RTTs between the fog nodes and the site of broker and driver "
            "(userspace delay daemon; docs/testbed.md).")
SITE_HELP = ("Node of the latency map hosting broker, driver and producer (default: the one whose worst RTT to "
             "the fog nodes is smallest).")


def wan_option(default: bool, prefix: str = "") -> Any:
    """`--wan/--no-wan`."""
    return typer.Option(default, "--wan/--no-wan", help=prefix + WAN_HELP)


def site_option(prefix: str = "") -> Any:
    """`--site NODE`."""
    return typer.Option(None, "--site", help=prefix + SITE_HELP)
