"""Names read from the host that are not UTF-8 are decoded with replacement where they are read:
log directory and link names (bytes paths on disk), Docker's and Podman's files (raw bytes, and JSON
``\\udcff`` escapes), so nothing downstream ever holds a string UTF-8 cannot encode."""

from __future__ import annotations

import json
import os
from pathlib import Path

from falcon_gpu.attribution.logdirs import ContainerName, LogDirScanner, PodName
from falcon_gpu.attribution.sources.containers import docker_name, podman_names
from falcon_gpu.model.text import encodable, host_name, utf8_text

from .helpers import container_id, pod_uid


def test_host_name_gives_the_bytes_decoded_with_replacement() -> None:
    assert host_name(os.fsdecode(b"tr\xffin-0")) == "tr\ufffdin-0" == b"tr\xffin-0".decode("utf-8", "replace")
    assert host_name("train-0") == "train-0"
    assert host_name("tr\u00e4in") == "tr\u00e4in"
    assert host_name("a\ud800b") == "a\ufffdb"  # no escaped byte: replaced all the same
    assert utf8_text("a\udcffb\ud83d") == "a\ufffdb\ufffd"
    assert not encodable("a\udcff") and encodable("\u00e4\U0001f600")


def test_a_log_dir_whose_name_is_not_utf8_names_its_pod_with_replacement(tmp_path: Path) -> None:
    log = tmp_path / "log"
    pods, containers = os.fsencode(log / "pods"), os.fsencode(log / "containers")
    os.makedirs(pods + b"/ml_tr\xffin-0_" + pod_uid(1).encode() + b"/ma\xfein")
    os.makedirs(containers)
    target = pods + b"/ml_tr\xffin-0_" + pod_uid(1).encode() + b"/ma\xfein/0.log"
    open(target, "wb").close()
    os.symlink(target, containers + b"/tr\xffin-0_ml_ma\xfein-" + container_id(1).encode() + b".log")
    maps = LogDirScanner(log).scan()
    assert maps.pods == {pod_uid(1): PodName("ml", "tr\ufffdin-0")}
    assert maps.containers == {container_id(1): ContainerName("ml", "tr\ufffdin-0", "ma\ufffdin", pod_uid(1))}
    assert all(encodable(v) for c in maps.containers.values() for v in (c.pod, c.container))
    assert LogDirScanner(log).scan() == maps


def test_docker_and_podman_names_that_are_not_utf8(tmp_path: Path) -> None:
    raw = tmp_path / "raw.json"
    raw.write_bytes(b'{"Name": "/tr\xffiner"}')
    assert docker_name(raw) == "tr\ufffdiner"
    escaped = tmp_path / "escaped.json"
    escaped.write_text(json.dumps({"Name": "/tr\udcffiner"}))  # json writes the escape "\udcff"
    assert docker_name(escaped) == "tr\ufffdiner"
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000)
    assert docker_name(deep) is None
    assert podman_names(json.dumps([{"id": "x", "names": ["nb\ud800"]}])) == {"x": "nb\ufffd"}
    assert podman_names("[" * 100_000) == {}
