"""Label and annotation keys the controller owns, shared by the generated manifests and the backend.

Every executor pod of one application carries the same spec (docs/kubernetes.md), so the controller steers placement
through a node label: the executor pods select `POOL_LABEL=<app>`, and a required anti-affinity keeps one
executor per node. Labelling a node adds it to the pool; unlabelling removes it once its executor is gone.
"""

from __future__ import annotations

import re

from gesscale.errors import UserError

POOL_LABEL = "gesscale.io/pool"  # on nodes: value = application name
APP_LABEL = "gesscale.io/app"  # on the driver and executor pods
ROLE_LABEL = "gesscale.io/role"  # "driver" | "executor"
SPARK_EXEC_ID_LABEL = "spark-exec-id"  # set by Spark on each executor pod
EXECUTORS_ANNOTATION = "gesscale.io/executors"  # on the driver pod template: executor count at start
RTT_ANNOTATION = "gesscale.io/rtt-ms"  # on nodes: JSON {peer: rtt_ms}
REGION_ANNOTATION = "gesscale.io/region"
LAT_ANNOTATION = "gesscale.io/lat"
LON_ANNOTATION = "gesscale.io/lon"
HOSTNAME_TOPOLOGY = "kubernetes.io/hostname"

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def check_dns_label(value: str, what: str) -> str:
    """`value` if it is a valid Kubernetes name (RFC 1123 label), else a `UserError` naming `what`."""
    if not _DNS_LABEL.match(value or ""):
        raise UserError(
            f"{what} {value!r} is not a valid Kubernetes name (lower-case letters, digits and '-', at most 63)"
        )
    return value


def executor_selector(app: str) -> str:
    """Label selector of this application's executor pods."""
    return f"{APP_LABEL}={app},{ROLE_LABEL}=executor"


def driver_selector(app: str) -> str:
    """Label selector of this application's driver pod."""
    return f"{APP_LABEL}={app},{ROLE_LABEL}=driver"
