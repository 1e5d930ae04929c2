"""Jinja filters that render the driver's and the controller's RBAC with gesscale's own generator (one source).

`gesscale k8s render` writes the same documents to manifests/driver.yaml and manifests/rbac.yaml; the
spark_rbac role applies what these filters return, so the cluster gets exactly the verbs the driver and the
controller use, with the controller's account in a namespace of its own (gesscale/k8s/rbac.py says why).
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

try:  # gesscale must be importable by the Python that runs ansible-playbook
    import yaml

    from gesscale.k8s.rbac import CONTROLLER_NAMESPACE, controller_rbac, driver_rbac
except ImportError as _err:  # pragma: no cover - reported when the filter is used
    _IMPORT_ERROR: ImportError | None = _err
    CONTROLLER_NAMESPACE = "gesscale-system"
else:
    _IMPORT_ERROR = None


def _check() -> None:
    if _IMPORT_ERROR is not None:
        raise AnsibleFilterError(f"the gesscale RBAC filters need the gesscale package in ansible's Python: "
                                 f"{_IMPORT_ERROR}")


def gesscale_controller_rbac(namespace: str, service_account: str, restart: bool = True,
                             controller_namespace: str = CONTROLLER_NAMESPACE, app: str = "gesscale-job",
                             nodes: list | None = None) -> str:
    """The controller's Namespace, ServiceAccount, roles and bindings as a multi-document YAML string."""
    _check()
    try:  # ansible hands tagged str subclasses: plain str for the YAML dumper
        docs = controller_rbac(str(namespace), str(service_account), bool(restart), app=str(app),
                               controller_namespace=str(controller_namespace),
                               nodes=[str(n) for n in nodes or []])
    except Exception as err:  # a UserError (same namespace twice) as the task's one-line failure
        raise AnsibleFilterError(str(err)) from None
    return yaml.safe_dump_all(docs, sort_keys=False)


def gesscale_driver_rbac(namespace: str, service_account: str) -> str:
    """The Spark driver's ServiceAccount, Role and RoleBinding as a multi-document YAML string."""
    _check()
    return yaml.safe_dump_all(driver_rbac(str(namespace), str(service_account)), sort_keys=False)


class FilterModule:
    """Registers the gesscale RBAC filters with Ansible."""

    def filters(self) -> dict:
        """Filter name -> function."""
        return {"gesscale_controller_rbac": gesscale_controller_rbac, "gesscale_driver_rbac": gesscale_driver_rbac}
