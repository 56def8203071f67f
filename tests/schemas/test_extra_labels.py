"""The ``labels`` setting (CONTRACT section 2): on every series of every schema and as
Open-Falcon tags; a name that is invalid or one the agent sets itself exits 2 naming it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from falcon_gpu.agent.cycle import CycleRunner
from falcon_gpu.agent.runtime import build
from falcon_gpu.schemas.extra_labels import RESERVED, as_labels
from falcon_gpu.settings import ConfigError, Settings, load_settings
from tests.agent.test_cli_e2e import cli

LABELS = {"cluster": "prod-a", "region": "eu west/1"}


def render(schema: str) -> tuple[set[frozenset[tuple[str, str]]], list[str]]:
    """Every label set of one cycle of the real code path, and the Open-Falcon tags."""
    settings = Settings(node="sim-node", labels=LABELS, process_metrics=True, schema=schema, sinks=[])  # type: ignore[call-arg]
    rt = build(settings, simulate="shared-gpu", with_sinks=False)
    try:
        rt.attributor.refresh_now()
        runner = CycleRunner(
            node="sim-node",
            step=30,
            source=rt.source,
            attributor=rt.attributor,
            sinks=[],
            telemetry=rt.telemetry,
            schema=schema,  # type: ignore[arg-type]
            process_metrics=True,
            labels=as_labels(settings.labels),
        )
        rendered = runner.run()
        sets = {frozenset(s.labels) for f in rendered.prometheus.families for s in f.series}
        return sets, [i.tags for i in rendered.falcon]
    finally:
        rt.close(1.0)


@pytest.mark.parametrize("schema", ["falcon_gpu", "dcgm"])
def test_every_series_and_item_carries_the_labels(schema: str) -> None:
    sets, tags = render(schema)
    assert len(sets) > 20  # distinct label sets: device, MIG, pod, process, agent
    names_seen = set()
    for lb in sets:
        labels = dict(lb)
        assert labels["cluster"] == "prod-a" and labels["region"] == "eu west/1", lb
        assert len(labels) == len(lb)  # no label name twice
        names_seen |= set(labels)
    assert {"pod", "gpu"} <= names_seen  # pod and device series are among them
    assert tags and all(t.endswith("cluster=prod-a,region=eu_west_1") for t in tags), tags[:3]


def test_agent_series_carry_the_labels() -> None:
    sets, _ = render("falcon_gpu")
    agent = [
        dict(lb) for lb in sets if "kind" not in dict(lb) and set(dict(lb)) == {"node", "cluster", "region"}
    ]
    assert agent  # agent_cycle_seconds, agent_cycles_total: node + the labels, nothing else


@pytest.mark.parametrize(
    ("labels", "why"),
    [
        ({"node": "x"}, "'node' is reserved"),
        ({"UUID": "x"}, "'UUID' is reserved"),  # a dcgm-exporter label
        ({"instance": "x"}, "'instance' is reserved"),
        ({"__meta": "x"}, "'__meta' is reserved"),
        ({"label_app": "x"}, "'label_app' is reserved"),
        ({"9lives": "x"}, "'9lives' is not a valid label name"),
        ({"a-b": "x"}, "'a-b' is not a valid label name"),
        ({"cluster": ""}, "'cluster' has an empty value"),
    ],
)
def test_bad_labels_name_the_setting(labels: dict[str, str], why: str) -> None:
    with pytest.raises(ConfigError, match="setting 'labels'") as err:
        load_settings(None, labels=labels)
    assert why in str(err.value)


def test_every_label_a_schema_sets_is_reserved() -> None:
    sets = render("falcon_gpu")[0] | render("dcgm")[0] | render("nvidia_smi")[0]
    used = {name for lb in sets for name, _ in lb} - set(LABELS)
    assert used <= RESERVED, used - RESERVED


def test_cli_exits_2_naming_the_label_and_env_json_works(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'spool_dir = "{tmp_path / "spool"}"\nlabels = {{gpu = "0"}}\n')
    bad = cli("run", "--simulate", "--once", "--config", str(cfg))
    assert bad.returncode == 2
    assert "setting 'labels'" in bad.stderr and "'gpu' is reserved" in bad.stderr
    assert "Traceback" not in bad.stderr
    cfg.write_text(f'node = "n1"\nspool_dir = "{tmp_path / "spool"}"\n')
    env = {**os.environ, "FALCON_GPU_LABELS": json.dumps({"cluster": "a"})}
    ok = cli("plugin", "--simulate", "--config", str(cfg), env=env)
    assert ok.returncode == 0, ok.stderr
    items = json.loads(ok.stdout)
    assert items and all(i["tags"].endswith("cluster=a") for i in items)
    assert load_settings(None, labels={"team": "ml"}).labels == {"team": "ml"}
