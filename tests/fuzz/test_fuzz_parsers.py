"""Any input to the scenario parser and the settings parser: it loads, or it is refused with the
error the CLI turns into exit 2 and a message (ScenarioError, ConfigError); nothing else escapes
(which the CLI would report as a fatal error, exit 1). A few of the inputs hypothesis found are run
through the real CLI too: exit 2, a message naming the place, no traceback."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given
from hypothesis import strategies as st

from falcon_gpu.settings import load_settings, setting_fields
from falcon_gpu.settings_sources import ConfigError
from falcon_gpu.simulator.scenario.parse import load_scenario, resolve_scenario
from falcon_gpu.simulator.scenario.strict_json import ScenarioError
from falcon_gpu.sinks import config as sink_config
from tests.fuzz.strategies import ANY_CHAR, FUZZ, JSON_VALUES, NAMES, PATHOLOGICAL, toml_documents

ROOT = Path(__file__).resolve().parents[2]
RAW_MARK = "\0raw\0"
"""Where the document gets a pathological literal (:data:`PATHOLOGICAL`) instead of a JSON value."""
BASE = json.loads(resolve_scenario("shared-gpu").read_text())
SINK_KEYS = sorted(
    {k for c in (sink_config.RemoteWriteSinkConfig, sink_config.PushgatewaySinkConfig,
                 sink_config.FalconAgentSinkConfig, sink_config.FalconTransferSinkConfig,
                 sink_config.StdoutSinkConfig) for k in c.model_fields} - {"type"}
)  # fmt: skip


ANY_BYTES = st.binary(max_size=300) | st.text(ANY_CHAR, max_size=300).map(
    lambda t: t.encode("utf-8", "surrogatepass")
)


def written(factory: pytest.TempPathFactory, name: str, data: bytes) -> Path:
    path = factory.getbasetemp() / name
    path.write_bytes(data)
    return path


def loads_or_refuses_scenario(path: Path) -> None:
    """Loads, and then the simulator can lay its host out (every name one file name), or refuses."""
    try:
        scenario = load_scenario(path)
    except ScenarioError as exc:
        assert str(exc)
        return
    if scenario.host is not None:
        host = scenario.host
        for name in (*host.log_pods, *host.log_containers, *(cid for cid, _ in host.docker_containers)):
            assert os.path.basename(name) == name and name not in ("", ".", "..") and "\0" not in name
            os.fsencode(name)  # what laying out the node writes


@FUZZ
@given(ANY_BYTES)
def test_any_bytes_as_a_scenario_load_or_are_refused(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    loads_or_refuses_scenario(written(tmp_path_factory, "scenario.json", data))


@st.composite
def mutated_scenarios(draw: st.DrawFn) -> Any:
    """The bundled scenario with one value somewhere in it replaced by any JSON value or name."""
    doc = json.loads(json.dumps(BASE))
    node: Any = doc
    for _ in range(draw(st.integers(0, 6))):
        if isinstance(node, dict) and node:
            key = draw(st.sampled_from(sorted(node)))
        elif isinstance(node, list) and node:
            key = draw(st.integers(0, len(node) - 1))
        else:
            break
        if not isinstance(node[key], dict | list):
            break
        node = node[key]
    value = draw(JSON_VALUES | NAMES | st.lists(NAMES, max_size=3) | st.integers(-(10**30), 10**30))
    if draw(st.integers(0, 3)) == 0:
        value = RAW_MARK  # a quarter of the documents: a pathological literal there
    if isinstance(node, dict):
        node[draw(st.sampled_from(sorted(node)) | NAMES) if node else draw(NAMES)] = value
    elif isinstance(node, list):
        node.append(value)
    return doc


@FUZZ
@given(mutated_scenarios(), PATHOLOGICAL)
def test_any_value_anywhere_in_a_scenario_loads_or_is_refused(
    tmp_path_factory: pytest.TempPathFactory, doc: Any, raw: str
) -> None:
    path = tmp_path_factory.getbasetemp() / "mutated.json"
    text = json.dumps(doc)  # ensure_ascii: a lone surrogate goes as its \\u escape
    path.write_text(text.replace(json.dumps(RAW_MARK), raw))
    loads_or_refuses_scenario(path)


def loads_or_refuses_settings(config: Path | None, env: dict[str, str]) -> None:
    """Loads, and then is usable (a setting that loads also works), or raises ConfigError."""
    kept = {
        k: v for k, v in os.environ.items() if not k.startswith("FALCON_GPU_") or k == "FALCON_GPU_JOBS_DIR"
    }
    with mock.patch.dict(os.environ, {**kept, **env}, clear=True):
        try:
            settings = load_settings(config)
        except ConfigError as exc:
            assert str(exc)
            return
    for key in (
        "proc_root",
        "log_root",
        "kubelet_socket",
        "docker_root",
        "spool_dir",
        "jobs_dir",
        "passwd_file",
    ):
        with contextlib.suppress(OSError):  # a NUL in the path would raise ValueError, in a reader or a sink
            os.stat(getattr(settings, key))
    for text in (settings.node, settings.listen, *settings.labels.values()):
        text.encode("utf-8")  # on every series, and in the listen socket's bind
    for sink in settings.sinks:
        assert Path(sink.name).name == sink.name and sink.name not in (".", "..")  # one spool directory


@FUZZ
@given(ANY_BYTES)
def test_any_bytes_as_a_config_file_load_or_are_refused(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    loads_or_refuses_settings(written(tmp_path_factory, "config.toml", data), {})


@FUZZ
@given(toml_documents(sorted(setting_fields()), SINK_KEYS))
def test_any_config_file_loads_and_works_or_is_refused(
    tmp_path_factory: pytest.TempPathFactory, text: str
) -> None:
    path = tmp_path_factory.getbasetemp() / "fuzzed.toml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    loads_or_refuses_settings(path, {})


def _env_safe(text: str) -> bool:
    """What an environment can hold: no NUL, and surrogates only as escaped bytes."""
    try:
        os.fsencode(text)
    except UnicodeEncodeError:
        return False
    return "\0" not in text


SINK = st.fixed_dictionaries(
    {"type": st.sampled_from(["stdout", "remote_write", "pushgateway", "falcon_agent", "falcon_transfer"])},
    optional={k: JSON_VALUES | NAMES for k in SINK_KEYS},
)
ENV_VALUES = (
    NAMES
    | JSON_VALUES.map(json.dumps)
    | st.lists(SINK, max_size=2).map(json.dumps)
    | st.dictionaries(NAMES, NAMES, max_size=3).map(json.dumps)
)


@FUZZ
@given(st.dictionaries(st.sampled_from(sorted(setting_fields())), ENV_VALUES.filter(_env_safe), max_size=4))
def test_any_environment_loads_or_is_refused(env: dict[str, str]) -> None:
    loads_or_refuses_settings(None, {f"FALCON_GPU_{k.upper()}": v for k, v in env.items()})


CLI_CASES = [
    ("scenario", "[" * 100_000, "nested too deeply"),
    (
        "scenario",
        '{"gpus": [{"uuid": "GPU-1", "name": "x", "memory_total_bytes": 1' + "0" * 5000 + "}]}",
        "not a usable JSON document",
    ),
    ("config", "labels = " + "[" * 50_000, "nests arrays or tables too deeply"),
    ("config", 'node = "a\\u0000b"', "setting 'node': holds a NUL character"),
]


@pytest.mark.parametrize(("kind", "content", "message"), CLI_CASES)
def test_the_cli_exits_2_with_a_message_and_no_traceback(
    tmp_path: Path, kind: str, content: str, message: str
) -> None:
    path = tmp_path / ("s.json" if kind == "scenario" else "c.toml")
    path.write_text(content)
    flag = ["--simulate", str(path)] if kind == "scenario" else ["--config", str(path)]
    env = {"PATH": "/usr/bin:/bin", "XDG_CACHE_HOME": str(tmp_path), "FALCON_GPU_JOBS_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "falcon_gpu", "run", "--once", *flag],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr


def _scenario_with(path: str, value: Any) -> Any:
    doc = json.loads(json.dumps(BASE))
    *parents, last = path.split(".")
    node = doc
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    node[int(last) if isinstance(node, list) else last] = value
    return doc


SCENARIO_CASES = [
    ("gpus.0.memory_total_bytes", float("nan"), "gpus[0].memory_total_bytes: expected a number"),
    ("gpus.0.power_watts", float("inf"), "gpus[0].power_watts: expected a number"),
    ("host.log_pods", ["ml_a/../../x_1"], "host.log_pods[0]: must be one file name"),
    ("host.log_pods", ["ml_\ud800_1"], "host.log_pods[0]: holds a lone surrogate"),
    ("host.log_containers", ["a\0b"], "host.log_containers[0]: must be one file name"),
    ("host.docker_containers", [{"id": "../x", "name": "n"}], "host.docker_containers[0].id: must be one"),
]


@pytest.mark.parametrize(("where", "value", "message"), SCENARIO_CASES)
def test_scenario_values_that_would_fail_later_are_refused_naming_their_path(
    tmp_path: Path, where: str, value: Any, message: str
) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps(_scenario_with(where, value)))
    with pytest.raises(ScenarioError, match=re.escape(message)):
        load_scenario(path)


def test_a_non_utf8_log_name_given_as_its_escaped_byte_is_laid_out(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps(_scenario_with("host.log_pods", ["ml_tr\udcffin_1"])))
    assert load_scenario(path).host.log_pods == ("ml_tr\udcffin_1",)  # type: ignore[union-attr]


SETTINGS_CASES = [
    ({"FALCON_GPU_SINKS": '[{"type": "stdout", "name": "../x"}]'}, "cannot name the sink's spool directory"),
    ({"FALCON_GPU_LABELS": '{"cluster": "a\\udcffb"}'}, "setting 'labels.cluster': is not UTF-8 text"),
    ({"FALCON_GPU_PROC_ROOT": "/proc", "FALCON_GPU_SINKS": "[" * 50_000}, "setting 'sinks'"),
]


@pytest.mark.parametrize(("env", "message"), SETTINGS_CASES)
def test_settings_that_would_fail_later_are_refused_naming_the_setting(
    env: dict[str, str], message: str
) -> None:
    with mock.patch.dict(os.environ, env), pytest.raises(ConfigError, match=re.escape(message)):
        load_settings(None)
