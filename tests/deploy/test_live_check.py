"""The live check: every dashboard panel and recording rule against live agents.

Five agents (mixed-4gpu and shared-gpu in cluster prod-a, mig-node, faulty-node and gb200-nvl in
prod-b; pods allocated, some shared, some idle, one GPU faulty, two lost, two off their NVLink
fabric) remote_write into a
Prometheus that evaluates the shipped rules every second; shared-gpu also pushes to a
Pushgateway that Prometheus scrapes, so its node arrives twice and must still count once.
Then every panel query of every dashboard (variables set to All) and every recording rule must
answer, and the key answers must equal the figures computed from the scenario JSON
(tests/deploy/expected.py). A second Prometheus scrapes the same agents' ``listen`` endpoints
and must agree on device and pod series.

The agents run in their default configuration, so the default ``[metrics] profile`` (the lean
set) is what every panel and rule must answer from; a second set of the same agents with
``profile = "full"`` feeds a second Prometheus, and whatever answers there (panels, rules, alerts)
must answer here too, and the lean store must hold at most 30 device series per GPU.

Parts that need a setting the agent does not have yet are skipped with the reason, detected
at run time: ``labels`` (the cluster label; without it every cluster is ""), ``listen`` (the
scrape store) and ``falcon_gpu_allocatable_devices`` (free devices).
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from falcon_gpu.health.evaluator import CRITICAL_XIDS
from falcon_gpu.schemas import profiles
from tests.delivery.conftest import ManagedServer, free_port, http_get, wait_until
from tests.deploy.expected import Expected, last
from tests.deploy.live import (
    HAS_LISTEN,
    ROOT,
    RULE_FILES,
    RULES,
    Agent,
    agent_config,
    query,
    start_agent,
    start_prometheus,
    start_pushgateway,
    stop,
    values,
)

pytestmark = pytest.mark.servers

AGENTS = (
    Agent("mixed-4gpu", "prod-a"),
    Agent("shared-gpu", "prod-a"),
    Agent("mig-node", "prod-b"),
    Agent("faulty-node", "prod-b"),
    Agent("gb200-nvl", "prod-b"),
)
TWICE = AGENTS[1]  # reaches the store by remote_write and through the Pushgateway
WINDOW = 20  # seconds of cost window checked exactly
# what a dashboard's variables and Grafana's macros become here
MACROS = {
    "$__rate_interval": "5s",
    "$__interval": "1s",
    "$__range_s": str(WINDOW),
    "$__range": f"{WINDOW}s",
    "$cluster": ".*",
    "$node": ".*",
    "$uuid": ".*",
    "$namespace": ".*",
    "$pod": ".*",
}
NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


@dataclass(frozen=True)
class Live:
    store: ManagedServer
    scraper: ManagedServer | None
    at: float  # every answer is read at this instant

    def ask(self, promql: str, server: ManagedServer | None = None) -> list[dict[str, Any]]:
        return query(server or self.store, promql, self.at)


def expected(agent: Agent) -> Expected:
    return Expected.load(agent.scenario)


def allocated_by_cluster_namespace() -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = defaultdict(float)
    for agent in AGENTS:
        for namespace, gpus in expected(agent).allocated_by_namespace().items():
            out[(agent.cluster_label, namespace)] += gpus
    return dict(out)


def recording_rules() -> dict[str, str]:
    """Record name -> its expressions (a name recorded by several rules, one per ``reason`` of the
    risk score, reads what each of them reads)."""
    groups = [g for name in RULE_FILES for g in yaml.safe_load((RULES / name).read_text())["groups"]]
    out: dict[str, str] = {}
    for r in (r for g in groups for r in g["rules"] if "record" in r):
        out[r["record"]] = out.get(r["record"], "") + "\n" + r["expr"]
    return out


def panel_queries() -> list[tuple[str, str]]:
    out = []
    for path in sorted((ROOT / "conf" / "grafana").glob("*.json")):
        board = json.loads(path.read_text())
        for panel in board["panels"]:
            for target in panel["targets"]:
                expr = target["expr"]
                for macro, value in MACROS.items():
                    expr = expr.replace(macro, value)
                out.append((f"{path.stem}: {panel['title']} {target['refId']}", expr))
    return out


def reads(series: str, expr: str, rules: dict[str, str], seen: frozenset[str] = frozenset()) -> bool:
    """True when the query reads ``series``, directly or through a rule."""
    names = set(NAME.findall(expr))
    if series in names:
        return True
    return any(reads(series, rules[n], rules, seen | {n}) for n in names & rules.keys() - seen)


def needs_allocatable(expr: str, rules: dict[str, str]) -> bool:
    return reads("falcon_gpu_allocatable_devices", expr, rules)


def needs_slurm(expr: str, rules: dict[str, str]) -> bool:
    """The live agents run no Slurm scenario: conf/prometheus/tests/carbon_test.yml checks those rules."""
    return reads("falcon_gpu_slurm_job_energy_joules_total", expr, rules)


def _agents_running(root: Path, procs: list[subprocess.Popen[bytes]]) -> None:
    for agent, proc in zip(AGENTS, procs, strict=True):
        if proc.poll() is not None:
            log = (root / f"{agent.node}.log").read_text()[-3000:]
            raise AssertionError(f"agent {agent.node} exited {proc.returncode}: {log}")


def _everything_arrived(store: ManagedServer) -> bool:
    gpus = sum(len(expected(a).gpus) for a in AGENTS)
    allocated = allocated_by_cluster_namespace()
    seen = values(query(store, "count(max by (node, uuid) (falcon_gpu_info))"))
    held = values(query(store, "namespace:falcon_gpu_allocated:sum"), "cluster", "namespace")
    return (
        seen == {(): gpus}
        and held.keys() == allocated.keys()
        and all(math.isclose(held[k], v, rel_tol=1e-9) for k, v in allocated.items())
    )


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """The agents in their default configuration (the default ``[metrics] profile``)."""
    root: Path = tmp_path_factory.mktemp("live")
    pushgateway = start_pushgateway(root)
    store = start_prometheus(root, "store", [], pushgateway.url.removeprefix("http://"))
    listens = [f"127.0.0.1:{free_port()}" if HAS_LISTEN else "" for _ in AGENTS]
    procs = []
    scraper = None
    try:
        for agent, listen in zip(AGENTS, listens, strict=True):
            also_pushed = pushgateway.url if agent is TWICE else ""
            config = agent_config(root, agent, f"{store.url}/api/v1/write", listen, also_pushed)
            procs.append(start_agent(root, agent, config))
        if HAS_LISTEN:
            scraper = start_prometheus(root, "scraper", listens)

        def arrived() -> bool:
            _agents_running(root, procs)
            return _everything_arrived(store)

        wait_until(arrived, 90, "every GPU and every namespace's allocation in the store")
        time.sleep(WINDOW + 2)  # one whole cost window of steady allocations
        _agents_running(root, procs)
        yield Live(store, scraper, float(int(time.time()) - 1))
    finally:
        for proc in procs:
            stop(proc)
        for server in (store, scraper, pushgateway):
            if server is not None:
                server.stop()


@pytest.fixture(scope="module")
def live_full(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """The same agents with ``[metrics] profile = "full"`` (today's every series), remote-writing
    into a Prometheus of their own: what answered before the lean default existed."""
    root: Path = tmp_path_factory.mktemp("live-full")
    store = start_prometheus(root, "store", [])
    procs = []
    try:
        for agent in AGENTS:
            config = agent_config(root, agent, f"{store.url}/api/v1/write", "", profile="full")
            procs.append(start_agent(root, agent, config))

        def arrived() -> bool:
            _agents_running(root, procs)
            return _everything_arrived(store)

        wait_until(arrived, 90, "every GPU and every namespace's allocation in the full-profile store")
        time.sleep(5)  # a few evaluations of every rule
        _agents_running(root, procs)
        yield Live(store, None, float(int(time.time()) - 1))
    finally:
        for proc in procs:
            stop(proc)
        store.stop()


@pytest.fixture(scope="module")
def has_allocatable(live: Live) -> bool:
    return bool(live.ask("falcon_gpu_allocatable_devices"))


def test_every_recording_rule_answers(live: Live, has_allocatable: bool) -> None:
    rules = recording_rules()
    empty = [
        name
        for name in rules
        if (has_allocatable or not needs_allocatable(name, rules))
        and not needs_slurm(name, rules)
        and not live.ask(name)
    ]
    assert empty == []


def test_every_panel_query_answers(live: Live, has_allocatable: bool) -> None:
    rules = recording_rules()
    queries = panel_queries()
    assert len(queries) > 50
    empty = [
        title
        for title, expr in queries
        if (has_allocatable or not needs_allocatable(expr, rules)) and not live.ask(expr)
    ]
    assert empty == []


def test_free_devices_per_node_and_cluster(live: Live, has_allocatable: bool) -> None:
    if not has_allocatable:
        pytest.skip("the agent does not emit falcon_gpu_allocatable_devices yet (issue 7, h7b)")
    want = {(a.cluster_label, a.node): float(expected(a).free_devices()) for a in AGENTS}
    assert values(live.ask("node:falcon_gpu_free:count"), "cluster", "node") == want
    clusters: dict[tuple[str], float] = defaultdict(float)
    for (cluster, _node), free in want.items():
        clusters[(cluster,)] += free
    assert values(live.ask("cluster:falcon_gpu_free:count"), "cluster") == clusters


def test_cluster_gpu_count_and_models(live: Live) -> None:
    count: dict[tuple[str], float] = defaultdict(float)
    models: dict[tuple[str, str], float] = defaultdict(float)
    for agent in AGENTS:
        for model, n in expected(agent).models().items():
            count[(agent.cluster_label,)] += n
            models[(agent.cluster_label, model)] += n
    assert values(live.ask("cluster:falcon_gpu_devices:count"), "cluster") == count
    assert values(live.ask("cluster_model:falcon_gpu_devices:count"), "cluster", "model") == models


def test_known_pod_memory_and_utilisation(live: Live) -> None:
    agent = AGENTS[1]
    process = expected(agent).pod_process("team-a", "jupyter-alice", "notebook")
    pod = f'{{cluster="{agent.cluster_label}",namespace="team-a",pod="jupyter-alice"}}'
    assert values(live.ask(f"namespace_pod:falcon_gpu_memory_used:bytes{pod}")) == {
        (): float(last(process["used_memory_bytes"]))
    }
    assert values(live.ask(f"namespace_pod:falcon_gpu_utilization:sum{pod}")) == {
        (): last(process["sm_util_percent"]) / 100
    }


def test_used_over_requested_per_pod_and_namespace(live: Live) -> None:
    """The shared-gpu agent lists its pods' quotas from the simulator's API server (pod_requests):
    the used / requested rules equal the scenario's processes over its api_pods' HAMi limits."""
    agent = AGENTS[1]
    want = expected(agent)
    alice = want.pod_process("team-a", "jupyter-alice", "notebook")
    render = want.pod_process("team-b", "dashboard-render-6f7c9", "render")
    alice_memory, alice_compute = want.requested("team-a", "jupyter-alice", "notebook")
    render_memory, render_compute = want.requested("team-b", "dashboard-render-6f7c9", "render")
    assert (alice_memory, alice_compute, render_memory, render_compute) == (
        8192 * 2**20,
        0.5,
        4096 * 2**20,
        None,
    )
    cluster = f'cluster="{agent.cluster_label}"'

    def ratio(rule: str, *keys: str) -> dict[tuple[str, ...], float]:
        return values(live.ask(f"{rule}{{{cluster}}}"), *keys)

    pods = ("namespace", "pod")
    assert ratio("namespace_pod:falcon_gpu_memory_used_of_requested:ratio", *pods) == {
        ("team-a", "jupyter-alice"): pytest.approx(last(alice["used_memory_bytes"]) / alice_memory),
        ("team-b", "dashboard-render-6f7c9"): pytest.approx(
            last(render["used_memory_bytes"]) / render_memory
        ),
    }
    compute = ratio("namespace_pod:falcon_gpu_utilization_of_requested:ratio", *pods)
    assert compute[("team-a", "jupyter-alice")] == pytest.approx(
        last(alice["sm_util_percent"]) / 100 / alice_compute
    )
    assert ("team-b", "dashboard-render-6f7c9") not in compute  # gpucores 0: no ratio, never +Inf
    assert all(math.isfinite(v) for v in compute.values())
    by_namespace = ratio("namespace:falcon_gpu_memory_used_of_requested:ratio", "namespace")
    assert by_namespace[("team-b",)] == pytest.approx(last(render["used_memory_bytes"]) / render_memory)


def test_faulty_gpus_report_health_2(live: Live) -> None:
    agent = AGENTS[3]
    failing = expected(agent).failing_gpus()
    assert len(failing) == 3
    health = values(live.ask(f'gpu:falcon_gpu_health:max{{node="{agent.node}"}}'), "uuid")
    assert {uuid for (uuid,), value in health.items() if value == 2} == failing
    unhealthy = values(live.ask("node:falcon_gpu_unhealthy:count"), "node")
    assert unhealthy[(agent.node,)] == len(failing)
    assert unhealthy[(AGENTS[0].node,)] == 0


def test_namespace_gpu_hours_over_a_known_window(live: Live) -> None:
    """The Cost dashboard's query over a WINDOW-second range: a pod sharing a GPU with two
    others is charged a third of it, a MIG instance its share of the GPU's memory."""
    (expr,) = [e for title, e in panel_queries() if title == "cost: GPU-hours allocated A"]
    got = values(live.ask(expr), "cluster", "namespace")
    want = {key: gpus * WINDOW / 3600 for key, gpus in allocated_by_cluster_namespace().items()}
    assert got.keys() == want.keys()
    for key, hours in want.items():
        assert math.isclose(got[key], hours, rel_tol=1e-9), (key, got[key], hours)
    shared = AGENTS[1].cluster_label
    assert math.isclose(got[(shared, "team-b")], WINDOW / 3600 / 3, rel_tol=1e-9)


@pytest.mark.skipif(not HAS_LISTEN, reason="the agent has no `listen` setting yet (issue 10, h10a)")
def test_a_jobs_gpus_are_compared_with_its_median(live: Live) -> None:
    """shared-gpu's pipeline-0 is a Job (batch.kubernetes.io/job-name) on two GPUs: its job_name
    came from the API pod list with no pod_labels entry, and each GPU is set against the median
    of the two (no GPM there: NVML's utilisation)."""
    agent = AGENTS[1]
    want = {g["uuid"]: last(g["utilization_gpu_percent"]) / 100 for g in expected(agent).gpus[1:3]}
    median = sum(want.values()) / 2  # the 0.5 quantile of two
    assert values(live.ask("job:falcon_gpu_devices:count"), "cluster", "namespace", "job_name") == {
        (agent.cluster_label, "ml", "pipeline"): 2.0
    }
    got = values(live.ask('gpu_job:falcon_gpu_sm_activity:of_median{job_name="pipeline"}'), "node", "uuid")
    assert got.keys() == {(agent.node, uuid) for uuid in want}
    for (_node, uuid), ratio in got.items():
        assert math.isclose(ratio, want[uuid] / median, rel_tol=1e-9), uuid


def test_scraping_prometheus_gives_the_same_answers(live: Live) -> None:
    assert live.scraper is not None
    for promql, labels in (
        ("max by (cluster, node, uuid, model) (falcon_gpu_info)", ("cluster", "node", "uuid", "model")),
        (
            'max by (cluster, node, uuid) (falcon_gpu_memory_used_bytes{mig_uuid=""})',
            ("cluster", "node", "uuid"),
        ),
        ("max by (cluster, node, uuid) (falcon_gpu_utilization_ratio)", ("cluster", "node", "uuid")),
        ("gpu:falcon_gpu_health:max", ("cluster", "node", "uuid")),
        (
            "container_gpu:falcon_gpu_memory_used:bytes",
            ("cluster", "node", "uuid", "mig_uuid", "pod", "container"),
        ),
        (
            "container_gpu:falcon_gpu_utilization:ratio",
            ("cluster", "node", "uuid", "mig_uuid", "pod", "container"),
        ),
        ("namespace:falcon_gpu_allocated:sum", ("cluster", "namespace")),
        ("cluster_model:falcon_gpu_devices:count", ("cluster", "model")),
    ):
        pushed = values(live.ask(promql), *labels)
        assert pushed, promql
        assert values(live.ask(promql, live.scraper), *labels) == pushed, promql


def test_a_node_delivered_twice_is_there_twice_and_counted_once(live: Live) -> None:
    """The premise of the count checks above: shared-gpu's raw series come by both paths
    (they differ in job or instance), yet every rule counts its GPUs once."""
    gpus = float(len(expected(TWICE).gpus))
    assert values(live.ask(f'count(falcon_gpu_info{{node="{TWICE.node}"}})')) == {(): 2 * gpus}
    assert values(live.ask(f'node:falcon_gpu_devices:count{{node="{TWICE.node}"}}')) == {(): gpus}


def test_alerts_fire_on_the_faulty_node(live: Live) -> None:
    """The alerts without a `for` fire within the run; FalconGpuLost is at least pending."""
    faulty = AGENTS[3]
    want = expected(faulty)

    def alerts(name: str, *labels: str) -> set[tuple[str, ...]]:
        found = live.ask(f'ALERTS{{alertname="{name}",node="{faulty.node}"}}')
        return {tuple(r["metric"][k] for k in labels) for r in found}

    critical = {(uuid, xid) for uuid, xid in want.xids() if int(xid) in CRITICAL_XIDS}
    assert critical and alerts("FalconGpuCriticalXid", "uuid", "xid", "alertstate") == {
        (uuid, xid, "firing") for uuid, xid in critical
    }
    ecc = want.rising_uncorrectable_ecc()
    assert ecc and alerts("FalconGpuUncorrectableEccErrors", "uuid", "alertstate") == {
        (u, "firing") for u in ecc
    }
    lost = {g["uuid"] for g in want.gpus if g.get("lost_at_cycle") is not None}
    assert {uuid for uuid, _state in alerts("FalconGpuLost", "uuid", "alertstate")} == lost


def test_no_rule_evaluation_failed(live: Live) -> None:
    """A many-to-many join or a bad expression is an evaluation failure Prometheus counts."""
    metrics = http_get(f"{live.store.url}/metrics").decode().splitlines()
    failures = [line for line in metrics if line.startswith("prometheus_rule_evaluation_failures_total{")]
    groups = sum(len(yaml.safe_load((RULES / f).read_text())["groups"]) for f in RULE_FILES)
    assert len(failures) == groups, failures  # one counter per rule group
    assert all(line.endswith(" 0") for line in failures), failures


def _answers(live: Live, has_allocatable: bool) -> set[str]:
    """The titles of the panel queries and the names of the recording rules that answer."""
    rules = recording_rules()
    asked = [*panel_queries(), *((name, name) for name in rules)]
    return {
        title
        for title, expr in asked
        if (has_allocatable or not needs_allocatable(expr, rules)) and live.ask(expr)
    }


def _alerts(live: Live) -> set[tuple[str, str, str]]:
    return {
        (r["metric"]["alertname"], r["metric"].get("node", ""), r["metric"].get("uuid", ""))
        for r in live.ask('ALERTS{alertname=~"FalconGpu.*"}')
    }


def test_the_lean_default_answers_whatever_the_full_profile_answers(
    live: Live, live_full: Live, has_allocatable: bool
) -> None:
    full, lean = _answers(live_full, has_allocatable), _answers(live, has_allocatable)
    assert len(full) > 100
    assert full - lean == set()
    assert _alerts(live_full) - _alerts(live) == set()


PROBLEMS = "|".join(
    sorted(profiles.SPARSE | {"falcon_gpu_xid_errors_total", "falcon_gpu_nvlink_errors_total"})
)
"""The families with a series only while something is wrong (in the default profile): each problem
costs its series while it lasts, on top of the budget."""


def device_series(without: str = "") -> str:
    """Each GPU's device-level series per delivery path: not pod, process, container or Slurm job
    series, not a MIG instance's, not recorded; ``without``: families (a regex) left out too."""
    others = "ALERTS.*|.*:.*|falcon_gpu_(pod|process|container|slurm_job)_.*" + (
        f"|{without}" if without else ""
    )
    return f'count by (instance, node, uuid) ({{uuid!="", mig_uuid="", __name__!~"{others}"}})'


def test_a_gpu_costs_at_most_30_device_series_in_the_default_profile(live: Live, live_full: Live) -> None:
    """A healthy GPU costs at most 30; a GPU with problems, 30 and one series per problem."""
    lean = values(live.ask(device_series()), "instance", "node", "uuid")
    full = values(live_full.ask(device_series()), "instance", "node", "uuid")
    gpus = sum(len(expected(a).gpus) for a in AGENTS)
    assert len({key[1:] for key in lean}) == len({key[1:] for key in full}) == gpus
    healthy = {(r["metric"]["node"], r["metric"]["uuid"]) for r in live.ask("gpu:falcon_gpu_health:max == 0")}
    assert len(healthy) >= gpus / 2
    assert max(n for key, n in lean.items() if key[1:] in healthy) <= 30
    assert max(values(live.ask(device_series(PROBLEMS))).values()) <= 30
    assert max(full.values()) > 30  # the budget is the default profile's doing
