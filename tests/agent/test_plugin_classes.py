"""The plugin builds no dataclass at start (issue 9, plugin start-up: <= 8x the bare interpreter).

Building a ``@dataclass`` generates and compiles its methods at import, about 1 ms of CPU a class
on Python 3.11, and falcon-agent starts the plugin every minute: the value classes on its path are
``msgspec.Struct`` classes (defined in C) or plain slotted classes instead. This guards that no module a
cached plugin run imports declares or uses a dataclass, and that ``dataclasses`` is not loaded.
``inspect`` is: msgspec imports it (through ``typing_extensions``) on every start, a cost measured in
``docs/BENCHMARKS.md`` ("Value classes").
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from falcon_gpu.simulator.scenario.parse import resolve_scenario
from tests.agent.probe import run_probe

PROBE = """
import contextlib, io, json, sys
from falcon_gpu.cli import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    main(["plugin", "--simulate", sys.argv[1]])
loaded = sorted({"dataclasses", "inspect"} & set(sys.modules))
import dataclasses

def uses_dataclasses(module):
    for value in vars(module).values():
        if value is dataclasses or getattr(value, "__module__", None) == "dataclasses":
            return True
        mine = isinstance(value, type) and value.__module__ == module.__name__
        if mine and "__dataclass_fields__" in vars(value):
            return True
    return False

users = sorted(n for n, m in list(sys.modules.items()) if n.startswith("falcon_gpu") and uses_dataclasses(m))
print(json.dumps({"users": users, "loaded": loaded, "items": len(json.loads(out.getvalue()))}))
"""


def _cached_run(scenario: str, cache: Path) -> dict[str, Any]:
    """The second of two plugin runs (the first fills the settings cache), each a new process."""
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "NODE_NAME": "classes-node"}
    env = {k: v for k, v in env.items() if not k.startswith("FALCON_GPU_")}
    run_probe(PROBE, scenario, env=env)
    return run_probe(PROBE, scenario, env=env)


@pytest.mark.parametrize("host", [False, True], ids=["bare node", "kubelet, pods, log dirs"])
def test_the_cached_plugin_builds_no_dataclass_and_does_not_load_dataclasses(
    tmp_path: Path, host: bool
) -> None:
    """Host-less: the node ``bench_plugin.py`` measures; with a host, the kubelet client, the log
    directories and the pod label source are loaded as well."""
    scenario = json.loads(resolve_scenario("mixed-4gpu").read_text())
    if not host:
        del scenario["host"]
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(scenario))
    run = _cached_run(str(path), tmp_path / "cache")
    assert run["users"] == []
    assert run["loaded"] == ["inspect"]  # msgspec's import (grpc's asyncio too, with a kubelet)
    assert isinstance(run["items"], int) and run["items"] > 20
