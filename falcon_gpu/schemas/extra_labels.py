"""The ``labels`` setting: which names a user may add to every series (CONTRACT section 2).

Checked once at start, so a setting that loads also renders: a name must be a
Prometheus label name, must not start with ``__`` (reserved by Prometheus), and
must not be one the schemas already set on some series (``node``, ``gpu``,
``pod``, the dcgm-exporter labels, the Open-Falcon tags...), because a series
with a duplicate label name is refused by every store and a silently replaced
one would mislabel data. Values must be non-empty (an empty label is no label).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from falcon_gpu.model.samples import Labels

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

RESERVED: frozenset[str] = frozenset(
    {
        # Prometheus and the remote-write sink
        "job", "instance", "le", "quantile",
        # falcon_gpu schema
        "node", "gpu", "uuid", "model", "driver_version", "cuda_version", "pci_bus_id",
        "gpu_instance", "compute_instance", "mig_profile", "mig_uuid",
        "namespace", "pod", "container", "pod_uid", "job_name", "resource", "allocated", "pid", "command",
        "type", "scope", "cause", "xid", "reason", "check", "kind", "sink", "outcome", "reader",
        "link", "policy", "runtime", "container_id", "claim_name", "claim_namespace", "workload",
        "slurm_job", "slurm_step", "uid", "user",
        # dcgm schema (dcgm-exporter's labels)
        "UUID", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION",
        "GPU_I_PROFILE", "GPU_I_ID", "err_code", "err_msg",
        # nvidia_smi schema (nvidia_gpu_exporter's labels)
        "name", "index", "gpu_instance_id", "compute_instance_id", "profile", "process_name",
        # Open-Falcon tags
        "GpuId", "gi",
    }
)  # fmt: skip
"""Label names some schema already uses (and ``label_*``, the copied pod labels)."""


def check_extra_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """Return ``labels`` unchanged when every name and value may be used.

    Raises ValueError naming the first bad label and saying why.
    """
    for name, value in labels.items():
        if not NAME.match(name):
            raise ValueError(f"label name {name!r} is not a valid label name ([A-Za-z_][A-Za-z0-9_]*)")
        if name.startswith("__"):
            raise ValueError(f"label name {name!r} is reserved: names starting with '__' are Prometheus's")
        if name in RESERVED or name.startswith("label_"):
            raise ValueError(f"label name {name!r} is reserved: the agent sets it itself; choose another")
        if not value:
            raise ValueError(f"label {name!r} has an empty value")
    return dict(labels)


def as_labels(labels: Mapping[str, str]) -> Labels:
    """The setting as a label tuple, in a fixed (sorted) order."""
    return tuple(sorted(labels.items()))
