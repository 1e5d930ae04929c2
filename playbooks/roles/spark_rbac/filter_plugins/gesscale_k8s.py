"""Jinja filter that renders the controller's RBAC with gesscale's own generator (one source of the RBAC).

`gesscale k8s manifests` writes the same documents to manifests/rbac.yaml; the spark_rbac role applies what
this filter returns, so the cluster gets exactly the verbs the controller's requests use.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

try:  # gesscale must be importable by the Python that runs ansible-playbook
    import yaml

    from gesscale.k8s.rbac import controller_rbac
except ImportError as _err:  # pragma: no cover - reported when the filter is used
    _IMPORT_ERROR: ImportError | None = _err
else:
    _IMPORT_ERROR = None


def gesscale_controller_rbac(namespace: str, service_account: str, restart: bool = True) -> str:
    """The controller's ServiceAccount, roles and bindings as a multi-document YAML string."""
    if _IMPORT_ERROR is not None:
        raise AnsibleFilterError(f"the gesscale RBAC filter needs the gesscale package in ansible's Python: "
                                 f"{_IMPORT_ERROR}")
    # ansible hands tagged str subclasses: plain str for the YAML dumper
    return yaml.safe_dump_all(controller_rbac(str(namespace), str(service_account), bool(restart)), sort_keys=False)


class FilterModule:
    """Registers the gesscale RBAC filter with Ansible."""

    def filters(self) -> dict:
        """Filter name -> function."""
        return {"gesscale_controller_rbac": gesscale_controller_rbac}
