"""NVLink through the real bindings: errors on all 18 links of a Hopper GPU (the per-link data-link
fields, which is all NVIDIA's mock serves), the ``nvlink`` health check seeing them rise, and no NVLink
series at all on GPUs whose links are not up (a T4, an L40S: the mock answers their NVLink counters
SUCCESS 0, a real driver NOT_SUPPORTED).

Each case runs the production pieces in a fresh interpreter on the mock (pynvml loads the library once
per process): the NVML source, the health checks and the three schemas, two cycles 61 s apart on the
source's clock (the data-link counters are read with the slow readings, once a minute while they hold)
and a second apart on the mock's (its error counters grow at the profile's rate per second). The
expected values come from the profile the test writes: ``nvlink_error.rate`` errors a second on the
``nvlink_error.links`` of a device, counted from ``MOCK_NVML_EPOCH``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from falcon_gpu.model.cycle import FAIL, PASS
from tests.real_nvml import mock

CYCLES = r"""
import json, logging, sys, time
import pynvml
from falcon_gpu.health import HealthEvaluator
from falcon_gpu.model.attribution import Attribution
from falcon_gpu.model.cycle import CycleData
from falcon_gpu.schemas import dcgm, falcon_gpu, openfalcon
from falcon_gpu.sinks.encoding import prom_text
from falcon_gpu.sources.nvml.source import NvmlSource
from falcon_gpu.model.telemetry import Telemetry

logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
telemetry = Telemetry()
source = NvmlSource(pynvml, telemetry)
health = HealthEvaluator()
out = []
for t in (1000.0, 1061.0):
    snapshot = source.collect(t)
    reports = health.evaluate(snapshot)
    cycle = CycleData(node="n", step=30, snapshot=snapshot, attribution=Attribution(), health=reports,
                      telemetry=telemetry.view())
    out.append({
        "falcon_gpu": prom_text.encode(falcon_gpu.render(cycle)),
        "dcgm": prom_text.encode(dcgm.render(cycle)),
        "openfalcon": [item.as_json() for item in openfalcon.render(cycle)],
        "nvlink_check": {uuid: r.checks.get("nvlink") for uuid, r in reports.items()},
    })
    time.sleep(1.2)
source.close()
json.dump({"cycles": out, "errors": telemetry.view().errors_total}, sys.stdout)
"""

RATE = 50
"""Errors a second the profile injects."""
SINCE = 1000
"""Seconds between ``MOCK_NVML_EPOCH`` and the test's start."""


def _run(lib_dir: Path, profile: dict[str, Any], path: Path, epoch: int) -> dict[str, Any]:
    mock.write_profile(profile, path)
    env = mock.environment(lib_dir, path, MOCK_NVML_EPOCH=str(epoch))
    done = subprocess.run(
        [sys.executable, "-c", CYCLES], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)
    assert result["errors"] == {}, result["errors"]
    result["log"] = done.stderr.splitlines()
    return result


_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})? (\S+)$")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def _series(text: str, prefix: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(name, the ``gpu``, ``link`` and ``type`` labels) -> value, for the samples whose name starts with
    ``prefix`` (Prometheus text; prometheus_client's parser renames counters ending in ``_TOTAL``)."""
    keep = {"gpu", "link", "type"}
    out = {}
    for line in text.splitlines():
        found = _SAMPLE.match(line)
        if found is None or not found[1].startswith(prefix):
            continue
        labels = tuple(sorted((k, v) for k, v in _LABEL.findall(found[2] or "") if k in keep))
        out[(found[1], labels)] = float(found[3])
    return out


def test_errors_on_links_12_to_17_of_an_h100_count_in_every_schema_and_fail_the_nvlink_check(
    nvml_lib_dir: Path, tmp_path: Path
) -> None:
    if not mock.is_mock():
        pytest.skip("injects NVLink errors through the mock's profile")
    profile = mock.load_profile("h100")
    assert profile["nvlink"]["links_per_gpu"] == 18
    devices = profile["devices"]
    devices[0]["nvlink_error"] = {"rate": RATE, "links": [15]}
    devices[1]["nvlink_error"] = {"rate": RATE, "links": [3, 17]}
    start = int(time.time())
    result = _run(nvml_lib_dir, profile, tmp_path / "h100-nvlink-errors.yaml", start - SINCE)
    low, high = RATE * SINCE, RATE * (int(time.time()) - start + SINCE + 1)
    first, second = result["cycles"]
    uuid0, uuid1, uuid2 = (d["uuid"] for d in devices[:3])

    # falcon_gpu: the links that counted, each with its three data-link kinds (no data CRC field on Hopper)
    errors = _series(first["falcon_gpu"], "falcon_gpu_nvlink_errors_total")
    assert {(dict(k[1])["gpu"], dict(k[1])["link"]) for k in errors} == {("0", "15"), ("1", "3"), ("1", "17")}
    assert {dict(k[1])["type"] for k in errors} == {"crc_flit", "replay", "recovery"}
    assert all(low <= v <= high for v in errors.values()), errors
    sent = _series(first["falcon_gpu"], "falcon_gpu_nvlink_transmit_bytes_total")
    assert {dict(k[1])["gpu"] for k in sent} == {str(d["index"]) for d in devices}

    # dcgm: the totals over the links, per GPU (0 where no link counted); no data CRC total
    totals = _series(first["dcgm"], "DCGM_FI_DEV_NVLINK_")
    for kind in ("CRC_FLIT", "REPLAY", "RECOVERY"):
        name = f"DCGM_FI_DEV_NVLINK_{kind}_ERROR_COUNT_TOTAL"
        assert low <= totals[(name, (("gpu", "0"),))] <= high
        assert 2 * low <= totals[(name, (("gpu", "1"),))] <= 2 * high
        assert totals[(name, (("gpu", "2"),))] == 0
    assert not any("CRC_DATA" in name for name, _ in totals)

    # the nvlink check: the second cycle (61 s on the source's clock) reads the counters again, risen
    assert first["nvlink_check"][uuid0] == PASS  # the first reading is history, not a rise
    checks = second["nvlink_check"]
    assert (checks[uuid0], checks[uuid1], checks[uuid2]) == (FAIL, FAIL, PASS)  # recovery errors rose
    later = _series(second["falcon_gpu"], "falcon_gpu_nvlink_errors_total")
    assert all(later[k] > v for k, v in errors.items())

    # the log says what the driver refused (the older per-link counters), not that the links are missing
    lines = [line for line in result["log"] if "NVLink fields" in line]
    named = "(nvlink_l0_crc_flit ... nvlink_l11_recovery)"
    assert lines and all(named in line for line in lines)  # one line per GPU model (issue 20 item 5)
    assert not [line for line in result["log"] if "links it does not have" in line]

    # openfalcon: the NVLink rates of every H100 (both cycles had NVLink: the second has a rate)
    rated = {item["tags"] for item in second["openfalcon"] if item["metric"] == "NvlinkTx"}
    assert len(rated) == len(devices)


@pytest.mark.parametrize("name", ["t4", "l40s"])
def test_a_gpu_without_an_active_nvlink_has_no_nvlink_series_in_any_schema(
    name: str, nvml_lib_dir: Path, tmp_path: Path
) -> None:
    profile = mock.load_profile(name)
    result = _run(nvml_lib_dir, profile, tmp_path / f"{name}.yaml", int(time.time()) - SINCE)
    for cycle in result["cycles"]:
        assert "nvlink" not in cycle["falcon_gpu"].lower()
        assert "nvlink" not in cycle["dcgm"].lower()
        assert not [item for item in cycle["openfalcon"] if "nvlink" in item["metric"].lower()]
        assert set(cycle["nvlink_check"].values()) == {None}  # no NVLink error counters: no check
        assert "memory_used" in cycle["falcon_gpu"]  # the rest of the GPU came through
