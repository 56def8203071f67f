"""A loopback Kubernetes API server that lists the simulated node's pods (``GET /api/v1/pods``).

The agent reads pod labels and GPU quotas (``pod_labels``, ``pod_requests``) from
the API server's pod list; this answers that one call the way kube-apiserver does,
so :mod:`falcon_gpu.attribution.kube_api` runs unchanged against the simulator:

* only ``GET /api/v1/pods``; any other path answers 404, another method 405;
* a bearer token is required: a missing or wrong one answers 401 (a ``Status``
  document, as the real server sends);
* ``fieldSelector`` may select only ``spec.nodeName=<node>`` (anything else is
  400 ``field label not supported``); pods are on the one simulated node, so
  another node's selector lists nothing (with no node name given, the pods are on
  whichever node is asked for);
* ``limit`` pages the list and ``metadata.continue`` carries the rest; a
  ``continue`` token this server did not hand out answers 400;
* items carry ``metadata`` (name, namespace, uid, labels), ``spec.nodeName`` and
  ``spec.containers[].resources`` (limits and requests as quantity strings).

It binds 127.0.0.1 only, on a port the kernel picks. ``fail_with`` makes it
answer an error status, for tests of a failing API server.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from falcon_gpu.simulator.scenario.host_model import ApiPod

PODS_PATH = "/api/v1/pods"
NODE_FIELD = "spec.nodeName="


def pod_item(pod: ApiPod, node: str) -> dict[str, Any]:
    """One pod as the API's pod list holds it (the fields the agent reads, and a phase)."""
    return {
        "metadata": {
            "name": pod.name,
            "namespace": pod.namespace,
            "uid": pod.uid,
            "labels": dict(pod.labels),
            **({"ownerReferences": [{**dict(pod.owner), "controller": True}]} if pod.owner else {}),
        },
        "spec": {
            "nodeName": node,
            "containers": [
                {"name": c.name, "resources": {"limits": dict(c.limits), "requests": dict(c.requests)}}
                for c in pod.containers
            ],
        },
        "status": {"phase": "Running"},
    }


def status(code: int, reason: str, message: str) -> dict[str, Any]:
    """kube-apiserver's error document."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}  # fmt: skip


def _token(offset: int) -> str:
    return base64.urlsafe_b64encode(f"offset:{offset}".encode()).decode()


def _offset(token: str) -> int | None:
    try:
        text = base64.urlsafe_b64decode(token.encode()).decode()
    except (ValueError, UnicodeDecodeError):
        return None
    kind, _, number = text.partition(":")
    return int(number) if kind == "offset" and number.isdigit() else None


class KubeApiServer:
    """Serves this node's pods on ``url`` to a client holding ``token``."""

    def __init__(self, pods: Sequence[ApiPod], node: str, token: str) -> None:
        self._pods = tuple(pods)
        self._node = node
        self._token = token
        self.fail_with: int | None = None
        """An HTTP status to answer every request with (a failing API server); None: answer."""
        self.calls = 0
        """Requests answered (a paginated list is one per page)."""
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    def answer(self, path: str, authorization: str | None) -> tuple[int, dict[str, Any]]:
        """(status, document) for one GET; the HTTP handler only moves bytes."""
        self.calls += 1
        if self.fail_with is not None:
            return self.fail_with, status(self.fail_with, "InternalError", "simulated failure")
        if authorization != f"Bearer {self._token}":
            return 401, status(401, "Unauthorized", "Unauthorized")
        url = urlparse(path)
        if url.path != PODS_PATH:
            return 404, status(404, "NotFound", "the server could not find the requested resource")
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        pods, node = self._pods, self._node
        selector = query.get("fieldSelector", "")
        if selector:
            if not selector.startswith(NODE_FIELD) or "," in selector:
                return 400, status(400, "BadRequest", f'field label not supported: "{selector}"')
            asked = selector[len(NODE_FIELD) :]
            node = node or asked
            if asked != node:
                pods = ()
        start = _offset(query["continue"]) if "continue" in query else 0
        if start is None:
            return 400, status(400, "BadRequest", "continue key is not valid")
        limit = int(query["limit"]) if query.get("limit", "").isdigit() and int(query["limit"]) > 0 else 0
        end = start + limit if limit else len(pods)
        meta: dict[str, Any] = {"resourceVersion": "1"}
        if end < len(pods):
            meta["continue"] = _token(end)
            meta["remainingItemCount"] = len(pods) - end
        items = [pod_item(p, node) for p in pods[start:end]]
        return 200, {"kind": "PodList", "apiVersion": "v1", "metadata": meta, "items": items}

    def start(self) -> str:
        """Bind 127.0.0.1 and serve in a daemon thread; returns the base URL."""
        if self._httpd is not None:
            return self.url
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                code, body = owner.answer(self.path, self.headers.get("Authorization"))
                self._send(code, body)

            def do_POST(self) -> None:
                self._send(405, status(405, "MethodNotAllowed", "the server does not allow this method"))

            def _send(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the simulated server is quiet; the agent logs what matters

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        self._httpd = httpd
        self.url = f"http://127.0.0.1:{httpd.server_address[1]}"
        self._thread = threading.Thread(target=httpd.serve_forever, name="simulated-kube-api", daemon=True)
        self._thread.start()
        return self.url

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
