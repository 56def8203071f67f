"""Source ``containers``: names of plain Docker and Podman containers (no Kubernetes needed).

Bare-metal hosts run training in containers the kubelet never sees. Their ID is
in the process's cgroup (:mod:`falcon_gpu.attribution.runtime_cgroup`); their
name is in the runtime's own files, read read-only here, never through its CLI
or socket:

* Docker: ``<docker_root>/containers/<id>/config.v2.json``, key ``Name`` (``/trainer``);
* Podman: ``<containers_root>/storage/overlay-containers/containers.json``, a list of
  ``{"id", "names"}``.

A refresh lists Docker's container directories and parses only IDs it has not
seen (each name cached by container ID, dropped when its directory goes); Podman's
one file is re-read only when its modification time changes. Expected where
either location exists; a location that exists but cannot be read fails the
refresh (mount it read-only or set the path), and the last names are kept. The files
are read as bytes and decoded with replacement, and a name's lone surrogates (a JSON
``\udcff`` escape) become U+FFFD: every sink can carry the name
(:mod:`falcon_gpu.model.text`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from falcon_gpu.attribution.presence import PODMAN_FILE
from falcon_gpu.attribution.registry import MISS_REFRESH_GAP
from falcon_gpu.attribution.runtime_cgroup import RuntimeContainer
from falcon_gpu.attribution.settings import AttributionSettings
from falcon_gpu.attribution.source import EMPTY, SourceContext, SourceError, SourceView
from falcon_gpu.checks import FAIL, OK, SKIP, Row
from falcon_gpu.model.text import host_bytes, utf8_text

ROW = "container names (Docker, Podman)"


class NamesView(SourceView):
    def __init__(self, names: dict[tuple[str, str], str]) -> None:
        self.names = names
        """(runtime, container ID) -> name."""

    def plain_container_name(self, container: RuntimeContainer) -> str | None:
        return self.names.get((container.runtime, container.container_id))


def docker_name(config: Path) -> str | None:
    """The ``Name`` in one ``config.v2.json``, without Docker's leading ``/``; None if unreadable."""
    try:
        name = json.loads(host_bytes(config.read_bytes())).get("Name")
    except (OSError, ValueError, AttributeError, RecursionError):
        return None
    return utf8_text(name.lstrip("/")) or None if isinstance(name, str) else None


def podman_names(text: str) -> dict[str, str]:
    """ID -> first name, from Podman's ``containers.json``; entries of another shape are skipped."""
    try:
        entries = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    out: dict[str, str] = {}
    for entry in entries if isinstance(entries, list) else ():
        if isinstance(entry, dict) and isinstance(entry.get("id"), str):
            names = entry.get("names")
            if isinstance(names, list) and names and isinstance(names[0], str):
                out[entry["id"]] = utf8_text(names[0])
    return out


class ContainerNamesSource:
    name = "containers"
    min_gap: float | None = MISS_REFRESH_GAP

    def __init__(self, settings: AttributionSettings) -> None:
        self._settings = settings
        self.period = settings.refresh_period
        self._docker = settings.docker_root / "containers"
        self._podman = settings.containers_root / PODMAN_FILE
        self._docker_names: dict[str, str | None] = {}
        self._podman_names: dict[str, str] = {}
        self._podman_mtime: float | None = None
        self._view: SourceView = EMPTY

    def expected(self) -> bool:
        return self._docker.is_dir() or self._podman.exists()

    def _scan_docker(self) -> None:
        if not self._docker.is_dir():
            self._docker_names = {}
            return
        try:
            ids = os.listdir(self._docker)
        except OSError as exc:
            raise SourceError(
                f"cannot list {self._docker} ({exc.strerror}): mount the host's Docker data root "
                "read-only or set docker_root; Docker containers stay unnamed meanwhile"
            ) from None
        known = self._docker_names
        self._docker_names = {
            cid: known[cid] if cid in known else docker_name(self._docker / cid / "config.v2.json")
            for cid in ids
        }

    def _read_podman(self) -> None:
        try:
            mtime = self._podman.stat().st_mtime
        except FileNotFoundError:
            self._podman_names, self._podman_mtime = {}, None
            return
        if mtime == self._podman_mtime:
            return
        try:
            text = host_bytes(self._podman.read_bytes())
        except OSError as exc:
            raise SourceError(
                f"cannot read {self._podman} ({exc.strerror}): mount the host's containers storage "
                "read-only or set containers_root; Podman containers stay unnamed meanwhile"
            ) from None
        self._podman_names, self._podman_mtime = podman_names(text), mtime

    def names(self) -> dict[tuple[str, str], str]:
        """(runtime, container ID) -> name, as last read."""
        names = {("docker", cid): n for cid, n in self._docker_names.items() if n}
        names.update((("podman", cid), n) for cid, n in self._podman_names.items())
        return names

    def refresh(self) -> None:
        try:
            self._scan_docker()
            self._read_podman()
        finally:  # what one runtime gave still counts when the other failed
            self._view = NamesView(self.names())

    def recovered(self) -> str:
        return f"container names under {self._docker} and {self._podman} readable again"

    def view(self) -> SourceView:
        return self._view

    def diagnose(self) -> tuple[list[Row], SourceView]:
        if not self.expected():
            return [(ROW, SKIP, f"neither {self._docker} nor {self._podman} exists here")], EMPTY
        probe = ContainerNamesSource(self._settings)  # a fresh read; the agent's caches stay as they are
        try:
            probe.refresh()
        except SourceError as exc:
            return [(ROW, FAIL, str(exc))], EMPTY
        names = probe.names()
        runtimes = ", ".join(sorted({r for r, _ in names})) or "none"
        return [(ROW, OK, f"{len(names)} named containers ({runtimes})")], NamesView(names)

    def close(self) -> None:
        pass


def build(context: SourceContext) -> ContainerNamesSource:
    return ContainerNamesSource(context.settings)
