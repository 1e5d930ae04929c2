"""`gesscale k8s render|manifests|run`: Spark on Kubernetes with executors on the nodes the controller picks.

`render` writes the job's bundle and prints the kubectl commands that submit it; it submits nothing itself.
`submit`, its former name, still works (deprecated: the name promised a submission it never made).

Kept under `k8s` (not `gesscale job submit --backend k8s`) so it does not clash with the job's own commands.
"""

from __future__ import annotations

import inspect
import logging
import os
from datetime import datetime
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from gesscale.cli.controller_flags import controller_flags
from gesscale.cli.query_option import query_option
from gesscale.cli.ranges import EXECUTORS, MAX_STEPS, PORT, number_range
from gesscale.errors import UserError
from gesscale.k8s.names import POOL_LABEL

k8s_app = typer.Typer(
    help="Spark on Kubernetes (k3s): render the job's manifests (and the kubectl commands that submit them), run the "
         "controller against it.",
    no_args_is_help=True,
)

_APP = typer.Option("gesscale-job", "--app", help="Application name: pool label value, pod labels, names.")
_NS = typer.Option("spark", "--namespace", "-n", help="Namespace of the driver and executors.")


_CONTROLLER_SA = typer.Option("gesscale-controller", "--controller-sa", help="Controller service account.")
_CONTROLLER_NS = typer.Option("gesscale-system", "--controller-namespace",
                              help="Namespace of the controller (never the job's: the driver creates pods there).")
_OUT = typer.Option(Path("out/k8s"), "--out", "-o", help="Folder to write the files into.")


def register(app: typer.Typer) -> None:
    """Add the `k8s` command group."""
    app.add_typer(k8s_app, name="k8s")


def _print_written(paths: list[Path]) -> Console:
    console = Console()
    for p in paths:
        console.print(f"wrote {p}")
    return console


@k8s_app.command("manifests")
def manifests(
    out: Path = _OUT,
    namespace: str = _NS,
    controller_sa: str = _CONTROLLER_SA,
    controller_namespace: str = _CONTROLLER_NS,
    app: str = _APP,
    node: list[str] = typer.Option([], "--node", help="Limit node patches to this node (repeat; default: any)."),
    live_only: bool = typer.Option(False, "--live-only",
                                   help="Leave out the Deployment patch right (only the restart strategy needs it)."),
) -> None:
    """Write the controller's RBAC (rbac.yaml): its namespace and service account, nodes list/patch, and in
    the job's namespace pods list, events create and the driver Deployment get/patch (restart strategy)."""
    from gesscale.k8s.manifests import HEADER, dump_all, validate, write_bundle
    from gesscale.k8s.names import check_dns_label
    from gesscale.k8s.rbac import controller_rbac

    docs = controller_rbac(check_dns_label(namespace, "namespace"), check_dns_label(controller_sa, "service account"),
                           restart=not live_only, app=check_dns_label(app, "application name"),
                           controller_namespace=check_dns_label(controller_namespace, "controller namespace"),
                           nodes=node)
    for i, doc in enumerate(docs):
        validate(doc, f"rbac.yaml document {i + 1}")
    _print_written(write_bundle({"rbac.yaml": HEADER + dump_all(docs)}, out))


@k8s_app.command("render")
def render(
    out: Path = _OUT,
    app: str = _APP,
    namespace: str = _NS,
    image: str = typer.Option("gesscale-job:0.1.0", "--image", help="Container image with Spark and gesscale."),
    controller_image: str = typer.Option("gesscale-controller:0.1.0", "--controller-image",
                                         help="Container image of the controller (Dockerfile, target controller)."),
    bootstrap: str = typer.Option("pi02:9092", "--bootstrap", help="Kafka bootstrap as pods reach it."),
    executors: int = typer.Option(2, "--executors", **number_range(*EXECUTORS),
                                  help="Executors the driver starts with."),
    executor_memory: str = typer.Option("1g", "--executor-memory", help="Executor heap (Spark syntax: 1g, 768m)."),
    executor_cpu: str = typer.Option("1", "--executor-cpu", help="CPU request and limit of an executor pod."),
    controller_sa: str = _CONTROLLER_SA,
    controller_namespace: str = _CONTROLLER_NS,
    driver_sa: str = typer.Option("spark-driver", "--driver-sa", help="Spark driver service account."),
    query: str = query_option("A built-in or a module in the image (a file here is refused: it would not reach "
                              "the pod). "),
) -> None:
    """Write the job's bundle and print the kubectl commands that submit it (this command submits nothing).

    Files: driver.yaml (namespace, driver service account and Role, pod-template ConfigMap, checkpoint claim,
    Service, the driver Deployment running `gesscale job run` in client mode), executor-pod-template.yaml
    (pool-label selector, one executor per node), spark-defaults.conf, rbac.yaml (the controller's rights).
    Every document is checked against the Kubernetes schema first.
    """
    from gesscale.k8s.manifests import bundle, write_bundle
    from gesscale.k8s.spec import SubmitSpec

    spec = SubmitSpec(app=app, namespace=namespace, image=image, controller_image=controller_image,
                      bootstrap=bootstrap, executors=executors,
                      executor_memory=executor_memory, executor_cpu_request=executor_cpu,
                      executor_cpu_limit=executor_cpu, controller_service_account=controller_sa, query=query,
                      driver_service_account=driver_sa, controller_namespace=controller_namespace)
    _print_written(write_bundle(bundle(spec), out))
    typer.echo(
        "\nSubmit it (the first executors go to the nodes you label; the controller manages the label after):\n"
        f"  kubectl label node <node> {POOL_LABEL}={app} --overwrite   # once per initial executor node\n"
        f"  kubectl apply -f {out / 'driver.yaml'} -f {out / 'rbac.yaml'}\n"
        "  TOKEN=$(openssl rand -hex 16)   # the hook's token, in both namespaces (a pod reads its own only)\n"
        f"  kubectl -n {namespace} create secret generic {spec.token_secret} --from-literal=token=$TOKEN\n"
        f"  kubectl -n {controller_namespace} create secret generic {spec.token_secret} --from-literal=token=$TOKEN\n"
        f"  kubectl apply -f {out / 'controller.yaml'}        # the controller, in the cluster\n"
        f"Or run the controller on a laptop: kubectl -n {namespace} port-forward svc/{spec.driver_service} "
        f"{spec.http_port}:{spec.http_port}, then gesscale k8s run --hook-url http://127.0.0.1:{spec.http_port}"
    )


def _submit(**kwargs: Any) -> None:
    typer.echo("gesscale: note: `k8s submit` is now `k8s render`: it writes the bundle and prints the kubectl "
               "commands; it submits nothing", err=True)
    render(**kwargs)


_submit.__signature__ = inspect.signature(render)  # type: ignore[attr-defined]
k8s_app.command("submit", help="Deprecated alias: the former name of `k8s render`, which writes the job's "
                "bundle and prints the kubectl commands that submit it; submits nothing.")(_submit)


# The former flag names of `k8s run` still work.
_ALIASES = {"control_period_s": ("--period",), "min_replicas": ("--min",), "max_replicas": ("--max",)}


@k8s_app.command("run")
@controller_flags("k8s", aliases=_ALIASES)
def run(
    hook_url: str = typer.Option(..., "--hook-url",
                                 help="Driver HTTP API, e.g. http://gesscale-job-driver.spark.svc:4041."),
    token_env: str = typer.Option("GESSCALE_JOB_TOKEN", "--token-env",
                                  help="Environment variable holding the scaling hook's bearer token."),
    app: str = _APP,
    namespace: str = _NS,
    server: str = typer.Option(None, "--server", help="API server URL (default: kubeconfig or in-cluster)."),
    kubeconfig: str = typer.Option(None, "--kubeconfig", help="Kubeconfig file (default: in-cluster, ~/.kube)."),
    context: str = typer.Option(None, "--context", help="Kubeconfig context."),
    latency_map: Path = typer.Option(None, "--latency-map", exists=True,
                                     help="Latency map YAML; default: the nodes' gesscale.io/rtt-ms annotations."),
    policy: str = typer.Option("gesscale", "--policy", help="Policy id (see `gesscale simulate -p help`)."),
    strategy: str = typer.Option(
        "live", "--strategy",
        help="live: add/remove executors while the query runs; restart: stop the driver at its checkpoint, relabel, "
             "start it with the new executor count.",
    ),
    metrics_port: int = typer.Option(None, "--metrics-port", **number_range(0, PORT[1]),
                                     help="Serve the decision metrics on this port (0: a free port the system "
                                     "picks)."),
    state: Path = typer.Option(None, "--state", help="File keeping the policy's learned state across restarts."),
    steps: int = typer.Option(None, "--steps", **number_range(1, MAX_STEPS),
                              help="Stop after this many periods (default: run on)."),
    controller: dict[str, Any] | None = None,
    policy_option_args: list[str] | None = None,
) -> None:
    """Run the controller against Spark on Kubernetes: observe through the driver, place through node labels.

    Controller options (--control-period, --warmup, --min-replicas, --max-replicas, --recommend-only, ...) and
    policy options (--policy-option KEY=VALUE) are those of `gesscale options`; --period, --min and --max are
    the former names of the first three.
    """
    from gesscale.config import ControllerConfig
    from gesscale.exporter import ControllerMetrics
    from gesscale.k8s.api import KubeApi
    from gesscale.k8s.backend import K8sBackend, K8sBackendConfig
    from gesscale.k8s.nodes import latency_map_from_nodes, parse_node
    from gesscale.latency_map import load_latency_map
    from gesscale.mape import StepRecord
    from gesscale.observation import Reconfiguration
    from gesscale.policies.base import make_policy
    from gesscale.runner import LiveRunner, RunnerHooks, error_reporter
    from jobs.hook_client import HttpDriverHook

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    console = Console(soft_wrap=True)  # one line per period, never wrapped
    from gesscale.options import parse_policy_option_args

    cfg = ControllerConfig(**(controller or {}))
    recommend_only = cfg.recommend_only
    popts = parse_policy_option_args(policy_option_args or [], [policy]).get(policy, {})
    kube = KubeApi.connect(server=server, kubeconfig=kubeconfig, context=context)
    if latency_map is not None:
        lmap = load_latency_map(latency_map)
        if (note := lmap.unapplied_events("k8s run")) is not None:
            typer.echo(f"gesscale: warning: {note}", err=True)
    else:
        lmap = latency_map_from_nodes(parse_node(n) for n in kube.list_nodes())
        if lmap is None:
            raise UserError("no --latency-map given and no node carries the gesscale.io/rtt-ms annotation")
    token = os.environ.get(token_env)
    if not token and not recommend_only:
        raise UserError(f"set {token_env} to the scaling hook's token (the job's Secret), or use --recommend-only")
    hook = HttpDriverHook(hook_url, token)
    backend = K8sBackend(kube, hook, lmap, K8sBackendConfig(app=app, namespace=namespace, strategy=strategy,
                                                            control_period_s=cfg.control_period_s))
    exporter = ControllerMetrics()
    if metrics_port is not None:
        exporter.serve(metrics_port, host="0.0.0.0")  # scraped from outside the pod (Service, port-forward)

    def report(record: StepRecord, model: object) -> None:
        obs, rec = record.observation, record.reconfiguration
        what = "no change" if rec is None else (
            f"{rec.kind} +{list(rec.added)} -{list(rec.removed)} -> {list(rec.nodes)} "
            f"({'applied' if record.applied else 'recommended only'})"
        )
        when = datetime.fromtimestamp(obs.time_s).strftime("%H:%M:%S")
        console.print(f"{when} in={obs.input_rate:.0f}/s out={obs.throughput:.0f}/s "
                      f"backlog={obs.backlog:.0f} n={obs.n} ND_max={obs.nd_max_ms:g} ms: {what}")

    def log_fields(rec: Reconfiguration) -> dict[str, object]:
        return {"strategy": strategy}

    try:
        runner = LiveRunner(backend, make_policy(policy, **popts), lmap, cfg, state, [exporter.on_step, report],
                            RunnerHooks(log_fields=log_fields, on_error=error_reporter(console.print)))
        runner.run(max_steps=steps, catch_interrupt=True)
        if runner.interrupted:
            console.print("stopped")
    finally:
        backend.close()
        exporter.close()
