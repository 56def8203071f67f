"""Optional pod labels from the Kubernetes API (``pod_labels``, and ``job_labels`` where it has access).

Everything else in attribution works from node-local files; labels live only in
the API server. To keep the permission small, only this node's pods are listed
(``fieldSelector=spec.nodeName=<node>``, RBAC: ``get``/``list`` on pods), on the
background refresher's schedule (a periodic relist, paginated), and only the
allow-listed labels are kept, renamed ``label_<name>`` with every character
outside ``[a-zA-Z0-9_]`` replaced by ``_`` (as kube-state-metrics does). Two
allow-list entries that come out as the same label name (or one listed twice) keep
only the first: a series with a duplicated label name makes Prometheus refuse the
whole remote-write request. The job labels (``job_labels``: Kubeflow's, JobSet's,
Job's, Volcano's) need no allow-list entry: the value of the first one a pod has
becomes one label, ``job_name``, the same whichever controller made the job, so the
straggler rules group every job's GPUs by one name (``job`` is Prometheus's own).

Credentials are the in-cluster service account: the token file is re-read on
every list because bound tokens rotate. The token never appears in errors.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from falcon_gpu.advice.workload import controller
from falcon_gpu.attribution.pod_requests import Requested, pod_requested
from falcon_gpu.attribution.presence import SERVICE_ACCOUNT
from falcon_gpu.model.text import utf8_text

if TYPE_CHECKING:
    import requests

log = logging.getLogger("falcon_gpu.attribution")

_INVALID = re.compile(r"[^a-zA-Z0-9_]")
JOB_NAME = "job_name"
"""The label that names a pod's distributed job (from the first of ``job_labels`` it has)."""

Labels = tuple[tuple[str, str], ...]


class KubeApiError(Exception):
    """The API server could not be reached or refused the list; the message says what to check."""


def sanitise_label(name: str) -> str:
    """``app.kubernetes.io/name`` -> ``label_app_kubernetes_io_name``."""
    return "label_" + _INVALID.sub("_", name)


class KubeApiConfig(msgspec.Struct, frozen=True, gc=False):
    url: str
    token_file: Path | None
    ca_file: Path | None

    @classmethod
    def in_cluster(cls) -> KubeApiConfig | None:
        """From ``KUBERNETES_SERVICE_HOST``/``_PORT`` and the service account; None outside a cluster."""
        host = os.environ.get("KUBERNETES_SERVICE_HOST")
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        if not host:
            return None
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"  # IPv6 service address
        return cls(f"https://{host}:{port}", SERVICE_ACCOUNT / "token", SERVICE_ACCOUNT / "ca.crt")


class PodLabels(msgspec.Struct, frozen=True, gc=False):
    by_uid: dict[str, Labels]
    by_name: dict[tuple[str, str], Labels]
    """(namespace, pod) -> labels, for allocations (which carry no UID)."""
    requested: dict[tuple[str, str, str], Requested] = {}
    """(namespace, pod, container) -> its GPU quota; filled only with ``pod_requests``."""
    uids: dict[tuple[str, str], str] = {}
    """(namespace, pod) -> UID, for the ``pod_uid`` label."""
    owners: dict[tuple[str, str], str] = {}
    """(namespace, pod) -> its controller's name (the workload of right-sizing advice)."""


def _unique_by_label(allow: Sequence[str]) -> tuple[str, ...]:
    """The allow-list without entries whose label name an earlier entry already takes."""
    taken: dict[str, str] = {}
    for name in allow:
        first = taken.setdefault(sanitise_label(name), name)
        if first != name:
            log.warning("pod_labels: %r and %r both become %s; keeping %r",
                        first, name, sanitise_label(name), first)  # fmt: skip
    return tuple(taken.values())


def _job_name(labels: dict[str, Any], jobs: Sequence[str]) -> Labels:
    """``(("job_name", value),)`` from the first job label the pod has (with a value), else ``()``."""
    for name in jobs:
        value = labels.get(name)
        if value:
            return ((JOB_NAME, utf8_text(str(value))),)
    return ()


class PodLabelSource:
    """Lists this node's pods and keeps the allow-listed labels (and, with ``quotas``, the
    containers' GPU quotas from the same list). Not for the hot path."""

    def __init__(
        self,
        config: KubeApiConfig,
        node: str,
        allow: Sequence[str],
        *,
        quotas: bool = False,
        jobs: Sequence[str] = (),
        timeout: float = 10.0,
    ) -> None:
        """``jobs``: the job labels, in order; the first a pod has is its ``job_name``."""
        self._config = config
        self._quotas = quotas
        self._jobs = tuple(jobs)
        self._node = node
        self._allow = _unique_by_label(allow)
        self._timeout = timeout
        import requests  # lazy: only agents with pod_labels pay for it (the plugin starts faster)

        self._session: requests.Session = requests.Session()
        self._session.trust_env = False  # no proxy: the API server is reached directly

    def fetch(self) -> PodLabels:
        """One full (paginated) list. Raises KubeApiError on any failure."""
        by_uid: dict[str, Labels] = {}
        by_name: dict[tuple[str, str], Labels] = {}
        requested: dict[tuple[str, str, str], Requested] = {}
        uids: dict[tuple[str, str], str] = {}
        owners: dict[tuple[str, str], str] = {}
        params: dict[str, str] = {"fieldSelector": f"spec.nodeName={self._node}", "limit": "500"}
        while True:
            body = self._get("/api/v1/pods", params)
            for item in body.get("items") or []:
                meta = item.get("metadata") or {}
                labels = meta.get("labels") or {}
                picked = _job_name(labels, self._jobs) + tuple(
                    (sanitise_label(name), utf8_text(str(labels[name])))
                    for name in self._allow
                    if name in labels
                )  # a JSON "\\udcff" escape is a lone surrogate no sink could encode: U+FFFD instead
                uid = str(meta.get("uid", "")).lower()
                key = (utf8_text(str(meta.get("namespace", ""))), utf8_text(str(meta.get("name", ""))))
                if uid:
                    by_uid[uid] = picked
                    uids[key] = uid
                by_name[key] = picked
                if (owner := controller(meta)) is not None:
                    owners[key] = utf8_text(owner)
                if self._quotas:
                    for container, quota in pod_requested(item).items():
                        requested[(*key, container)] = quota
            cont = (body.get("metadata") or {}).get("continue")
            if not cont:
                return PodLabels(by_uid, by_name, requested, uids, owners)
            params = {**params, "continue": str(cont)}

    def _get(self, path: str, params: dict[str, str]) -> dict[str, Any]:
        headers = {"Accept": "application/json"}
        token_file = self._config.token_file
        if token_file is not None:
            try:
                headers["Authorization"] = "Bearer " + token_file.read_text().strip()
            except OSError as exc:
                raise KubeApiError(
                    f"cannot read the service account token {token_file}: {exc.strerror}; "
                    "set automountServiceAccountToken or clear pod_labels, pod_requests and job_labels"
                ) from None
        import requests

        ca = self._config.ca_file
        verify: bool | str = str(ca) if ca is not None and ca.exists() else True
        try:
            answer = self._session.get(
                self._config.url + path, params=params, headers=headers, timeout=self._timeout, verify=verify
            )
        except requests.RequestException as exc:
            reason = type(exc).__name__
            raise KubeApiError(f"Kubernetes API {self._config.url} unreachable: {reason}") from None
        if answer.status_code in (401, 403):
            raise KubeApiError(
                f"Kubernetes API refused to list pods ({answer.status_code}): grant the agent's "
                "service account get/list on pods (conf/kubernetes/overlays/pod-labels has the ClusterRole)"
            )
        if answer.status_code != 200:
            raise KubeApiError(f"Kubernetes API answered {answer.status_code} listing pods")
        try:
            body = answer.json()
        except ValueError:
            raise KubeApiError("Kubernetes API answered with something that is not JSON") from None
        if not isinstance(body, dict):
            raise KubeApiError("Kubernetes API answered with an unexpected document")
        return body

    def close(self) -> None:
        self._session.close()
