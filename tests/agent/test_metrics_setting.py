"""The ``[metrics]`` table and the per-sink ``schema`` as a user meets them: the plugin's Open-Falcon
items follow ``include`` / ``exclude``, a pattern matching nothing is a warning naming the nearest
family, and a bad value exits 2 naming the setting."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from falcon_gpu.cli import main
from falcon_gpu.schemas import dcgm, falcon_gpu, openfalcon, profiles
from falcon_gpu.schemas.selection import ALWAYS_KEPT, MetricSelection
from tests.schemas.fixtures import cycle


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "falcon-gpu.toml"
    path.write_text('node = "sel-node"\n' + text + "\n")
    return path


def _plugin_items(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> list[dict[str, object]]:
    assert main(["plugin", "--simulate", "default", "--config", str(_config(tmp_path, text))]) == 0
    items: list[dict[str, object]] = json.loads(capsys.readouterr().out)
    return items


def test_plugin_items_follow_include_and_exclude(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = '[metrics]\ninclude = ["GPU*", "FB*"]\nexclude = ["GPUHealth", "FBtotal"]'
    metrics = {str(item["metric"]) for item in _plugin_items(tmp_path, capsys, text)}
    assert metrics == {"GPUAlive", "GPUUtils", "GPUCount", "FBUsed", "FBfree"}


def test_plugin_without_metrics_table_sends_everything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    metrics = {str(item["metric"]) for item in _plugin_items(tmp_path, capsys, "")}
    assert {"GPUHealth", "FBtotal", "DeviceTemperature"} <= metrics


def test_a_pattern_matching_nothing_warns_with_the_nearest_family(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        items = _plugin_items(tmp_path, capsys, '[metrics]\nexclude = ["GPUHelth"]')
    assert {"GPUHealth", "GPUAlive"} <= {str(item["metric"]) for item in items}  # a warning, not an error
    said = "metrics.exclude: 'GPUHelth' matches no family of the schemas in use; the nearest family is"
    assert f"{said} 'GPUHealth'" in caplog.text


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('[metrics]\ninclude = "falcon_gpu_*"', "'metrics.include'"),
        ("[metrics]\nexclude = [1]", "'metrics.exclude.0'"),
        ('[metrics]\nincluded = ["x"]', "'metrics.included'"),
        ('[metrics]\nprofile = "lean"', "'metrics.profile': Input should be 'default' or 'full'"),
        ('schema = "nvidia"', "'schema'"),
        ('listen = "127.0.0.1:0"\nlisten_schema = "dcgn"', "'listen_schema'"),
        ('listen_schema = "dcgm"', "'listen_schema': applies to the 'listen' endpoint"),
        ('[[sinks]]\ntype = "remote_write"\nschema = "dcgn"', "'sinks.0.remote_write.schema'"),
        (
            '[[sinks]]\ntype = "falcon_agent"\nschema = "dcgm"',
            "'sinks.0.falcon_agent.schema': a falcon_agent sink does not take it (stdout, pushgateway",
        ),
    ],
)
def test_a_bad_value_exits_2_naming_the_setting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, named: str
) -> None:
    assert main(["run", "--once", "--simulate", "default", "--config", str(_config(tmp_path, text))]) == 2
    assert named in capsys.readouterr().err


def test_selection_semantics() -> None:
    everything = MetricSelection()
    assert everything.chosen(falcon_gpu.NAMES) is None
    only_dcgm_util = MetricSelection(
        include=["DCGM_FI_DEV_*_UTIL"], exclude=["*MEM_COPY*", "*_ENC_*", "*_DEC_*"]
    )
    assert only_dcgm_util.chosen(dcgm.NAMES) == {"DCGM_FI_DEV_GPU_UTIL"} | (ALWAYS_KEPT & set(dcgm.NAMES))
    no_agent = MetricSelection(exclude=["falcon_gpu_agent_*"])
    kept = no_agent.chosen(falcon_gpu.NAMES)
    assert kept is not None and {n for n in kept if "_agent_" in n} == ALWAYS_KEPT
    assert MetricSelection(exclude=["Pod*"]).chosen(openfalcon.NAMES) == set(openfalcon.NAMES) - {
        "PodGPUUtils",
        "PodFBUsed",
        "PodProcesses",
    }


def test_the_default_profile_is_the_lean_set_and_include_adds_to_it() -> None:
    lean = MetricSelection(profile="default")
    assert lean.chosen(falcon_gpu.NAMES, falcon_gpu.LEAN) == falcon_gpu.LEAN
    assert "falcon_gpu_performance_state" not in falcon_gpu.LEAN
    assert "falcon_gpu_health_worst" in falcon_gpu.LEAN and "falcon_gpu_health" in falcon_gpu.LEAN
    assert {n for n in dcgm.LEAN if n.startswith("DCGM_FI_")} == set(dcgm.NAMES) & set(
        profiles.DCGM_EXPORTER_DEFAULT + profiles.DCGM_EXPORTER_DEFAULT_PROF
    )
    more = MetricSelection(
        include=["falcon_gpu_performance_state"],
        exclude=["falcon_gpu_power_*", "falcon_gpu_agent_*"],
        profile="default",
    )
    kept = more.chosen(falcon_gpu.NAMES, falcon_gpu.LEAN)
    assert kept is not None
    assert kept - falcon_gpu.LEAN == {"falcon_gpu_performance_state"}
    dropped = {
        n for n in falcon_gpu.LEAN if n.startswith(("falcon_gpu_power_", "falcon_gpu_agent_"))
    } - ALWAYS_KEPT
    assert falcon_gpu.LEAN - kept == dropped and dropped
    # a schema with no lean set (nvidia_smi, Open-Falcon): the default profile is its full set
    assert lean.chosen(openfalcon.NAMES) is None
    assert MetricSelection(include=["GPU*"], profile="default").chosen(openfalcon.NAMES) == {
        n for n in openfalcon.NAMES if n.startswith("GPU")
    }


def test_every_name_a_profile_lists_is_a_family() -> None:
    """A misspelt name in profiles.py would silently keep a family in the default set."""
    families = set(falcon_gpu.NAMES) | set(dcgm.NAMES)
    named = profiles.FALCON_GPU_FULL_ONLY | profiles.SPARSE | profiles.DEFAULT_ONLY
    assert not named - set(falcon_gpu.NAMES)
    missing = set(profiles.DCGM_EXPORTER_DEFAULT + profiles.DCGM_EXPORTER_DEFAULT_PROF) - families
    # dcgm-exporter fields this schema has no reading for
    assert missing == {
        "DCGM_FI_DEV_PCIE_TX_THROUGHPUT",
        "DCGM_FI_DEV_PCIE_RX_THROUGHPUT",
        "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
    }


def test_an_excluded_family_is_not_rendered_at_all() -> None:
    """The builder drops the family before a Series of it exists; the rest is unchanged."""
    full = falcon_gpu.render(cycle())
    lean = falcon_gpu.render(cycle(), MetricSelection(exclude=["falcon_gpu_health", "falcon_gpu_clock_*"]))
    assert {f.name for f in full.families} - {f.name for f in lean.families} == {
        "falcon_gpu_health",
        "falcon_gpu_clock_event_active",
    }
    rest = {f.name: f for f in full.families}
    assert all(f.series == rest[f.name].series for f in lean.families)


def test_patterns_are_checked_against_the_schemas_the_outputs_read(tmp_path: Path) -> None:
    """All sinks in dcgm: a falcon_gpu device pattern selects nothing there, so it is warned about;
    the Open-Falcon names count only where an output sends items."""
    from falcon_gpu.agent.outputs import selection_warnings
    from falcon_gpu.settings import load_settings

    text = (
        '[metrics]\nexclude = ["falcon_gpu_health", "DCGM_FI_DEV_GPU_TEMP", "GPUHealth"]\n'
        '[[sinks]]\ntype = "remote_write"\nschema = "dcgm"'
    )
    warned = selection_warnings(load_settings(_config(tmp_path, text)))
    assert [w.split(":")[1].split("'")[1] for w in warned] == ["falcon_gpu_health", "GPUHealth"]
    with_falcon = text + '\n[[sinks]]\ntype = "falcon_agent"'
    assert len(selection_warnings(load_settings(_config(tmp_path, with_falcon)))) == 1


def test_excluding_a_whole_group_skips_it_and_keeps_the_rest() -> None:
    full = {f.name: f for f in falcon_gpu.render(cycle(process_metrics=True)).families}
    assert "falcon_gpu_pod_info" in full and "falcon_gpu_process_memory_used_bytes" in full
    lean = falcon_gpu.render(cycle(process_metrics=True), MetricSelection(exclude=["*_pod_*", "*_process_*"]))
    names = {f.name for f in lean.families}
    assert names == {n for n in full if "_pod_" not in n and "_process_" not in n}
    assert all(f.series == full[f.name].series for f in lean.families)
