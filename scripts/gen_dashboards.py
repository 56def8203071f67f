#!/usr/bin/env python3
"""Write the Grafana dashboards in conf/grafana/ from one description per panel.

Why generated: five dashboards share the datasource and label variables, the selectors and the
layout; written out by hand they drift apart. The JSON files are committed (users import them,
nothing runs this at install time); tests/deploy/test_dashboards.py fails when they differ from
what this script writes, and tests/deploy/test_live_check.py asks a live Prometheus every query.

Usage: python scripts/gen_dashboards.py [--check]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "conf" / "grafana"
DS = {"type": "prometheus", "uid": "${datasource}"}
# selectors: every panel filters on the variables that its series carry
C = 'cluster=~"$cluster"'
CN = C + ',node=~"$node"'
CNU = CN + ',uuid=~"$uuid"'
CNP = CN + ',namespace=~"$namespace",pod=~"$pod"'
CP = C + ',namespace=~"$namespace",pod=~"$pod"'
CS = C + ',namespace=~"$namespace"'
CNS = CN + ',namespace=~"$namespace"'
JOB_GPU = "{{namespace}}/{{job_name}} {{node}} GPU {{gpu}}"  # a Slurm job has no namespace: "/4242 …"
DEVICE = "cluster, node, uuid, mig_uuid, namespace, pod, container"  # one series per container and device


REQUESTED_NOTE = (
    "Of the GPU quota its containers were given (pod_requests); only containers with a quota count,"
    " and none of a quota of 0. 1 = it uses all it asked for."
)

CARBON_NOTE = (
    "The pods' attributed energy times each node's carbon_intensity (docs/DASHBOARDS.md, Energy and"
    " carbon per team); empty until the agents have the setting. Slurm: slurm_user: and slurm_job: rules."
)


def hours(series: str) -> str:
    """GPU-hours over the dashboard's time range from a gauge of GPUs held or busy.

    The subquery samples the gauge every step; dividing by the number of steps in the range
    (counted on vector(1)) and multiplying by the range gives GPU-hours whatever the step and
    whether the range's first step is included (Prometheus 2) or not (3).
    """
    steps = "scalar(count_over_time(vector(1)[$__range:$__interval]))"
    return f"sum_over_time({series}[$__range:$__interval]) / {steps} * $__range_s / 3600"


@dataclass(frozen=True)
class Panel:
    title: str
    kind: str  # stat | timeseries | table | bargauge
    exprs: tuple[str, ...]
    unit: str = "short"
    legend: str = ""
    width: int = 12
    height: int = 8
    description: str = ""


def stat(title: str, expr: str, unit: str = "short", width: int = 6, description: str = "") -> Panel:
    """A single figure in the top row."""
    return Panel(title, "stat", (expr,), unit=unit, width=width, height=4, description=description)


@dataclass
class Dashboard:
    uid: str
    title: str
    description: str
    panels: list[Panel] = field(default_factory=list)


def variable(name: str, label: str, query: str) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DS,
        "definition": query,
        "query": {"query": query, "refId": f"{name}-variable"},
        "refresh": 2,
        "includeAll": True,
        "allValue": ".*",
        "multi": True,
        "sort": 1,
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "hide": 0,
    }


def templating() -> dict[str, Any]:
    return {
        "list": [
            {
                "name": "datasource",
                "label": "Data source",
                "type": "datasource",
                "query": "prometheus",
                "current": {"selected": False, "text": "${DS_PROMETHEUS}", "value": "${DS_PROMETHEUS}"},
                "hide": 0,
            },
            variable("cluster", "Cluster", "label_values(falcon_gpu_info, cluster)"),
            variable("node", "Node", 'label_values(falcon_gpu_info{cluster=~"$cluster"}, node)'),
            variable(
                "uuid", "GPU UUID", 'label_values(falcon_gpu_info{cluster=~"$cluster",node=~"$node"}, uuid)'
            ),
            variable(
                "namespace",
                "Namespace",
                'label_values(falcon_gpu_pod_info{cluster=~"$cluster",node=~"$node"}, namespace)',
            ),
            variable(
                "pod",
                "Pod",
                'label_values(falcon_gpu_pod_info{cluster=~"$cluster",namespace=~"$namespace"}, pod)',
            ),
        ]
    }


def render_panel(panel: Panel, pid: int, x: int, y: int) -> dict[str, Any]:
    instant = panel.kind in ("stat", "table", "bargauge")
    targets = [
        {
            "refId": chr(ord("A") + i),
            "datasource": DS,
            "expr": expr,
            "legendFormat": panel.legend,
            "instant": instant,
            "range": not instant,
            **({"format": "table"} if panel.kind == "table" else {}),
        }
        for i, expr in enumerate(panel.exprs)
    ]
    out: dict[str, Any] = {
        "id": pid,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": DS,
        "gridPos": {"h": panel.height, "w": panel.width, "x": x, "y": y},
        "targets": targets,
        "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
        "options": {},
    }
    if panel.kind == "table":
        out["transformations"] = [{"id": "merge", "options": {}}]
    return out


def render(board: Dashboard) -> dict[str, Any]:
    panels, x, y, row_height = [], 0, 0, 0
    for pid, panel in enumerate(board.panels, start=1):
        if x + panel.width > 24:
            x, y, row_height = 0, y + row_height, 0
        panels.append(render_panel(panel, pid, x, y))
        x, row_height = x + panel.width, max(row_height, panel.height)
    kinds = sorted({p.kind for p in board.panels})
    return {
        "__inputs": [
            {
                "name": "DS_PROMETHEUS",
                "label": "Prometheus",
                "description": "The Prometheus-compatible store falcon_gpu writes to (or that scrapes it)",
                "type": "datasource",
                "pluginId": "prometheus",
                "pluginName": "Prometheus",
            }
        ],
        "__requires": [
            {"type": "grafana", "id": "grafana", "name": "Grafana", "version": "9.0.0"},
            {"type": "datasource", "id": "prometheus", "name": "Prometheus", "version": "1.0.0"},
            *({"type": "panel", "id": k, "name": k, "version": ""} for k in kinds),
        ],
        "uid": board.uid,
        "title": board.title,
        "description": board.description,
        "tags": ["falcon-gpu", "gpu"],
        "id": None,
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": 37,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "timepicker": {},
        "timezone": "",
        "annotations": {"list": []},
        "links": [
            {
                "type": "dashboards",
                "tags": ["falcon-gpu"],
                "asDropdown": True,
                "title": "falcon-gpu",
                "includeVars": True,
            }
        ],
        "templating": templating(),
        "panels": panels,
    }


def cluster() -> Dashboard:
    return Dashboard(
        "falcon-gpu-cluster",
        "falcon-gpu / Cluster",
        "How many GPUs, of which models; how busy; how much memory; allocated vs free; unhealthy.",
        [
            stat("GPUs", f"sum(cluster:falcon_gpu_devices:count{{{C}}})", width=4),
            stat("GPU-equivalents busy", f"sum(cluster:falcon_gpu_busy:sum{{{C}}})", width=4),
            stat(
                "Compute used",
                f"avg(gpu:falcon_gpu_utilization:ratio{{{C}}})",
                unit="percentunit",
                width=4,
                description="Average utilisation of the GPUs that report it (not MIG-enabled ones)",
            ),
            stat("Memory used", f"sum(cluster:falcon_gpu_memory_used:bytes{{{C}}})", unit="bytes", width=4),
            stat(
                "Memory used (share)",
                (
                    f"sum(cluster:falcon_gpu_memory_used:bytes{{{C}}})"
                    f" / sum(cluster:falcon_gpu_memory_total:bytes{{{C}}})"
                ),
                unit="percentunit",
                width=4,
            ),
            stat("Unhealthy GPUs", f"sum(cluster:falcon_gpu_unhealthy:count{{{C}}})", width=4),
            stat("Allocatable devices", f"sum(cluster:falcon_gpu_allocatable:sum{{{C}}})", width=4),
            stat("Allocated devices", f"sum(cluster:falcon_gpu_allocated:count{{{C}}})", width=4),
            stat(
                "Free devices",
                f"sum(cluster:falcon_gpu_free:count{{{C}}})",
                width=4,
                description="Devices the kubelet can hand out minus those allocated (GPUs, MIG instances)",
            ),
            Panel(
                "GPUs per model",
                "bargauge",
                (f"sum by (model) (cluster_model:falcon_gpu_devices:count{{{C}}})",),
                legend="{{model}}",
                width=12,
                height=4,
            ),
            Panel(
                "Compute used per cluster",
                "timeseries",
                (f"cluster:falcon_gpu_utilization:avg{{{C}}}",),
                unit="percentunit",
                legend="{{cluster}}",
            ),
            Panel(
                "GPU-equivalents busy per node",
                "timeseries",
                (f"node:falcon_gpu_busy:sum{{{C}}}",),
                legend="{{cluster}} {{node}}",
            ),
            Panel(
                "Nodes",
                "table",
                (
                    f"node:falcon_gpu_devices:count{{{C}}}",
                    f"node:falcon_gpu_free:count{{{C}}}",
                    f"node:falcon_gpu_unhealthy:count{{{C}}}",
                    f"node:falcon_gpu_memory_used:ratio{{{C}}}",
                ),
                width=24,
                description="A: GPUs, B: free devices, C: unhealthy GPUs, D: memory used (share)",
            ),
        ],
    )


def node() -> Dashboard:
    by_gpu = "cluster, node, gpu, uuid"
    return Dashboard(
        "falcon-gpu-node",
        "falcon-gpu / Node",
        "Per node and GPU: utilisation, memory, temperature, power, clocks, throttling, ECC, XID, health.",
        [
            stat("Compute used", f"avg(node:falcon_gpu_utilization:avg{{{CN}}})", unit="percentunit"),
            stat(
                "Memory used (share)", f"avg(node:falcon_gpu_memory_used:ratio{{{CN}}})", unit="percentunit"
            ),
            stat("Power", f"sum(node:falcon_gpu_power:watts{{{CN}}})", unit="watt"),
            stat("Free devices", f"sum(node:falcon_gpu_free:count{{{CN}}})"),
            Panel(
                "Utilisation per GPU",
                "timeseries",
                (f"gpu:falcon_gpu_utilization:ratio{{{CNU}}}",),
                unit="percentunit",
                legend="{{node}} GPU {{gpu}}",
            ),
            Panel(
                "Memory used per GPU",
                "timeseries",
                (f"gpu:falcon_gpu_memory_used:bytes{{{CNU}}}",),
                unit="bytes",
                legend="{{node}} GPU {{gpu}}",
            ),
            Panel(
                "Memory used per MIG instance",
                "timeseries",
                (
                    f"max by ({by_gpu}, mig_profile, mig_uuid) "
                    f'(falcon_gpu_memory_used_bytes{{{CNU},mig_uuid!=""}})',
                ),
                unit="bytes",
                legend="{{node}} GPU {{gpu}} {{mig_profile}} {{mig_uuid}}",
            ),
            Panel(
                "Temperature",
                "timeseries",
                (
                    f"max by ({by_gpu}) (falcon_gpu_temperature_celsius{{{CNU}}})",
                    f"max by ({by_gpu}) (falcon_gpu_memory_temperature_celsius{{{CNU}}})",
                ),
                unit="celsius",
                legend="{{node}} GPU {{gpu}}",
                description="A: GPU core, B: memory (HBM)",
            ),
            Panel(
                "Power",
                "timeseries",
                (
                    f"gpu:falcon_gpu_power:watts{{{CNU}}}",
                    f"max by ({by_gpu}) (falcon_gpu_power_limit_watts{{{CNU}}})",
                ),
                unit="watt",
                legend="{{node}} GPU {{gpu}}",
                description="A: drawn, B: limit",
            ),
            Panel(
                "Clocks",
                "timeseries",
                (
                    f"max by ({by_gpu}) (falcon_gpu_sm_clock_hertz{{{CNU}}})",
                    f"max by ({by_gpu}) (falcon_gpu_memory_clock_hertz{{{CNU}}})",
                ),
                unit="hertz",
                legend="{{node}} GPU {{gpu}}",
                description="A: SM, B: memory",
            ),
            Panel(
                "Throttle reasons active",
                "table",
                (f"max by ({by_gpu}, reason) (falcon_gpu_clock_event_active{{{CNU}}}) == 1",),
                description="The default profile has a reason's series only while it is active.",
            ),
            Panel(
                "ECC errors",
                "table",
                (f"max by ({by_gpu}, type, scope) (falcon_gpu_ecc_errors_total{{{CNU}}})",),
                description="The default profile has a counter only once it has counted an error.",
            ),
            Panel(
                "XID events",
                "table",
                (f"max by ({by_gpu}, xid) (falcon_gpu_xid_errors_total{{{CNU}}})",),
            ),
            Panel(
                "Health (0 pass, 1 warn, 2 fail)",
                "table",
                (
                    f"max by ({by_gpu}, check) (falcon_gpu_health{{{CNU}}}"
                    f' or label_replace(falcon_gpu_health_worst{{{CNU}}}, "check", "worst", "", ""))',
                ),
                description="Profile full: every check. Default profile: the checks not passing and"
                " check=worst, the GPU's worst check (a passing check has no series there).",
            ),
        ],
    )


def pods() -> Dashboard:
    return Dashboard(
        "falcon-gpu-pods",
        "falcon-gpu / Pods",
        "Which GPUs a pod runs on; its compute and memory, absolute and relative; energy; idle allocations.",
        [
            Panel(
                "Pods and their GPUs",
                "table",
                (
                    "max by (cluster, node, namespace, pod, container, gpu, uuid, mig_profile, resource,"
                    f" allocated) (falcon_gpu_pod_info{{{CNP}}})",
                ),
                width=24,
            ),
            Panel(
                "Compute used (GPU-equivalents)",
                "timeseries",
                (f"namespace_pod:falcon_gpu_utilization:sum{{{CP}}}",),
                legend="{{namespace}}/{{pod}}",
            ),
            Panel(
                "Memory used",
                "timeseries",
                (f"namespace_pod:falcon_gpu_memory_used:bytes{{{CP}}}",),
                unit="bytes",
                legend="{{namespace}}/{{pod}}",
            ),
            Panel(
                "Memory used, share of its GPU",
                "timeseries",
                (f"container_gpu:falcon_gpu_memory_used:ratio{{{CNP}}}",),
                unit="percentunit",
                legend="{{namespace}}/{{pod}}/{{container}} GPU {{gpu}} {{mig_profile}}",
            ),
            Panel(
                "Compute used, share of what it was allocated",
                "timeseries",
                (f"namespace_pod:falcon_gpu_utilization_of_allocation:ratio{{{CP}}}",),
                unit="percentunit",
                legend="{{namespace}}/{{pod}}",
                description="1 = it uses all it holds; above 1 on a time-sliced GPU that others leave idle",
            ),
            Panel(
                "Compute used / requested",
                "timeseries",
                (f"namespace_pod:falcon_gpu_utilization_of_requested:ratio{{{CP}}}",),
                unit="percentunit",
                legend="{{namespace}}/{{pod}}",
                description=REQUESTED_NOTE
                + " Compute: HAMi gpucores, vcuda-core; a whole GPU or replica is 1.",
            ),
            Panel(
                "Memory used / requested",
                "timeseries",
                (f"namespace_pod:falcon_gpu_memory_used_of_requested:ratio{{{CP}}}",),
                unit="percentunit",
                legend="{{namespace}}/{{pod}}",
                description=REQUESTED_NOTE + " Memory: HAMi gpumem, vcuda-memory.",
            ),
            Panel(
                "GPUs allocated (fractional on shared GPUs)",
                "timeseries",
                (f"namespace_pod:falcon_gpu_allocated:sum{{{CP}}}",),
                legend="{{namespace}}/{{pod}}",
            ),
            Panel(
                "Power",
                "timeseries",
                (f"namespace_pod:falcon_gpu_power:watts{{{CP}}}",),
                unit="watt",
                legend="{{namespace}}/{{pod}}",
            ),
            Panel(
                "Energy since the driver loaded",
                "table",
                (
                    f"sum by (cluster, namespace, pod)"
                    f" (max by ({DEVICE}) (falcon_gpu_pod_energy_joules_total{{{CNP}}}))",
                ),
                unit="joule",
            ),
            Panel(
                "Allocated but idle for",
                "table",
                (f"container_gpu:falcon_gpu_allocation_idle:seconds{{{CNP}}} > 0",),
                unit="s",
            ),
            Panel(
                "Distributed jobs: each GPU's SM activity, share of its job's median",
                "bargauge",
                (f"gpu_job:falcon_gpu_sm_activity:of_median{{{CNS}}}",),
                unit="percentunit",
                legend=JOB_GPU,
                description="The GPUs of one job (job_name: a pod job label, or a Slurm job id) side by"
                " side: near 1 they move together; one well below the others is a straggler"
                " (FalconGpuJobStraggler: below 0.7 for 5 minutes). SM activity from GPM, else utilisation.",
            ),
            Panel(
                "Distributed jobs: SM activity per GPU",
                "timeseries",
                (f"gpu_job:falcon_gpu_sm_activity:ratio{{{CNS}}}",),
                unit="percentunit",
                legend=JOB_GPU,
            ),
            Panel(
                "Distributed jobs: power and memory bandwidth, share of the job's median",
                "table",
                (
                    f"gpu_job:falcon_gpu_power:of_median{{{CNS}}}",
                    f"gpu_job:falcon_gpu_memory_bandwidth:of_median{{{CNS}}}",
                ),
                unit="percentunit",
                width=24,
                description="A: power; B: memory bandwidth (GPM's DRAM bandwidth, else the memory"
                " controller's busy time), each over the job's median: a GPU low in all three does less"
                " work than its peers, not only other work.",
            ),
            Panel(
                "Could run on: workloads and GPUs freed per placement",
                "table",
                (
                    f"profile:falcon_gpu_advice_workloads:count{{{C}}}",
                    f"profile:falcon_gpu_advice_gpus_freed:sum{{{C}}}",
                ),
                description="Per recommended placement (a MIG profile, shared-1/N or gpu): how many"
                " workloads it would hold with headroom (A) and the whole GPUs taking that advice"
                " frees (B). From job records; `falcon-gpu advise` prints the same per node.",
            ),
            Panel(
                "Right-sizing advice per workload",
                "table",
                (
                    "max by (cluster, node, namespace, workload, model, profile)"
                    f' (falcon_gpu_advice_memory_peak_bytes{{{CN},namespace=~"$namespace"}})'
                    " and on (cluster, node, namespace, workload, model, profile)"
                    " workload:falcon_gpu_advice_held:gpus",
                ),
                unit="bytes",
                description="Peak GPU memory per workload (its pods' controller, or the pod name"
                " without its generated suffix) and the smallest placement (profile) that holds it.",
            ),
        ],
    )


def health() -> Dashboard:
    by_gpu = "cluster, node, gpu, uuid, model"
    return Dashboard(
        "falcon-gpu-health",
        "falcon-gpu / Health",
        "Failing and warning GPUs, errors, XIDs, lost GPUs, and the agents themselves.",
        [
            stat("Unhealthy GPUs", f"sum(node:falcon_gpu_unhealthy:count{{{CN}}})"),
            stat("GPUs not answering", f"count(gpu:falcon_gpu_up:max{{{CNU}}} == 0) or vector(0)"),
            stat(
                "Firing alerts",
                f'count(ALERTS{{alertname=~"FalconGpu.*",alertstate="firing",{CN}}}) or vector(0)',
            ),
            stat(
                "Agents reporting", f"count(max by (cluster, node) (falcon_gpu_agent_cycles_total{{{CN}}}))"
            ),
            Panel(
                "Checks not passing (1 warn, 2 fail)",
                "table",
                (f"max by ({by_gpu}, check) (falcon_gpu_health{{{CNU}}}) > 0",),
                width=24,
            ),
            Panel(
                "GPUs at risk, riskiest first (score 0-1)",
                "table",
                (f"sort_desc(gpu:falcon_gpu_risk_score:ratio{{{CNU}}} > 0)",),
                description="The risk score of each GPU with any reason (docs/HEALTH.md, GPUs at risk);"
                " 0.8 or more raises FalconGpuDrainCandidate. Its reasons are in the next panel.",
            ),
            Panel(
                "Risk reasons (each one's part of the score)",
                "table",
                (f"sort_desc(gpu:falcon_gpu_risk_reason:ratio{{{CNU}}})",),
                description="Weight x how close the reason is to counting fully: climbing ECC,"
                " recurring XIDs, retired pages, pending or failed row remaps, NVLink and PCIe"
                " errors, time throttled. `falcon-gpu doctor` on the node lists the same.",
            ),
            Panel(
                "Uncorrectable ECC errors",
                "table",
                (f'max by ({by_gpu}, scope) (falcon_gpu_ecc_errors_total{{{CNU},type="uncorrected"}})',),
            ),
            Panel(
                "XID events",
                "table",
                (f"max by ({by_gpu}, xid) (falcon_gpu_xid_errors_total{{{CNU}}})",),
            ),
            Panel(
                "Retired pages and remapped rows",
                "table",
                (
                    f"max by ({by_gpu}, cause) (falcon_gpu_retired_pages{{{CNU}}})",
                    f"max by ({by_gpu}, type) (falcon_gpu_remapped_rows{{{CNU}}})",
                ),
            ),
            Panel(
                "NVLink fabric: not registered (state < 3) and faults",
                "table",
                (
                    f"max by ({by_gpu}) (falcon_gpu_fabric_state{{{CNU}}}) < 3",
                    f"max by ({by_gpu}, condition) (falcon_gpu_fabric_fault{{{CNU}}}) > 0",
                ),
                description="GPUs on an NVLink fabric (NVSwitch, GB200/GB300 NVL): A a registration that"
                " has not completed (1 not started, 2 in progress), B a condition the fabric reports.",
            ),
            Panel(
                "PCIe replays",
                "timeseries",
                (f"max by ({by_gpu}) (rate(falcon_gpu_pcie_replays_total{{{CNU}}}[$__rate_interval]))",),
                unit="ops",
                legend="{{node}} GPU {{gpu}}",
            ),
            Panel(
                "Agent cycle time",
                "timeseries",
                (f"max by (cluster, node) (falcon_gpu_agent_cycle_seconds{{{CN}}})",),
                unit="s",
                legend="{{node}}",
                width=8,
            ),
            Panel(
                "Agent errors",
                "timeseries",
                (
                    f"max by (cluster, node, kind)"
                    f" (rate(falcon_gpu_agent_errors_total{{{CN}}}[$__rate_interval]))",
                ),
                unit="ops",
                legend="{{node}} {{kind}}",
                width=8,
            ),
            Panel(
                "Spool backlog",
                "timeseries",
                (f"max by (cluster, node, sink) (falcon_gpu_agent_spool_bytes{{{CN}}})",),
                unit="bytes",
                legend="{{node}} {{sink}}",
                width=8,
            ),
        ],
    )


def cost() -> Dashboard:
    return Dashboard(
        "falcon-gpu-cost",
        "falcon-gpu / Cost",
        "GPU-hours allocated and actually used, and energy, per namespace and pod over the time range; "
        "a pod sharing a GPU is charged its share.",
        [
            Panel(
                "GPU-hours allocated",
                "table",
                (hours(f"namespace:falcon_gpu_allocated:sum{{{CS}}}"),),
                width=8,
            ),
            Panel(
                "GPU-hours used",
                "table",
                (hours(f"namespace:falcon_gpu_utilization:sum{{{CS}}}"),),
                width=8,
            ),
            Panel(
                "Energy (kWh)",
                "table",
                (
                    "sum by (cluster, namespace) (max by ("
                    + DEVICE
                    + f") (increase(falcon_gpu_pod_energy_joules_total{{{CS}}}[$__range]))) / 3.6e6",
                ),
                width=8,
            ),
            Panel(
                "GPUs held per namespace",
                "timeseries",
                (f"namespace:falcon_gpu_allocated:sum{{{CS}}}",),
                legend="{{cluster}} {{namespace}}",
            ),
            Panel(
                "Used / allocated per namespace",
                "timeseries",
                (
                    f"namespace:falcon_gpu_utilization:sum{{{CS}}}"
                    f" / namespace:falcon_gpu_allocated:sum{{{CS}}}",
                ),
                unit="percentunit",
                legend="{{cluster}} {{namespace}}",
            ),
            Panel(
                "Compute used / requested per namespace",
                "timeseries",
                (f"namespace:falcon_gpu_utilization_of_requested:ratio{{{CS}}}",),
                unit="percentunit",
                legend="{{cluster}} {{namespace}}",
                description=REQUESTED_NOTE,
            ),
            Panel(
                "Memory used / requested per namespace",
                "timeseries",
                (f"namespace:falcon_gpu_memory_used_of_requested:ratio{{{CS}}}",),
                unit="percentunit",
                legend="{{cluster}} {{namespace}}",
                description=REQUESTED_NOTE,
            ),
            Panel(
                "GPU-hours allocated per pod",
                "table",
                (hours(f"namespace_pod:falcon_gpu_allocated:sum{{{CP}}}"),),
            ),
            Panel(
                "Energy (kWh) and emissions (gCO2e), last day, per namespace",
                "table",
                (
                    f"namespace:falcon_gpu_energy_kwh:1d{{{CS}}}",
                    f"namespace:falcon_gpu_emissions_grams:1d{{{CS}}}",
                ),
                width=8,
                description=CARBON_NOTE,
            ),
            Panel(
                "Emissions per namespace (gCO2e in the last hour)",
                "timeseries",
                (f"namespace:falcon_gpu_emissions_grams:1h{{{CS}}}",),
                legend="{{cluster}} {{namespace}}",
                width=8,
                description=CARBON_NOTE,
            ),
            Panel(
                "Energy (kWh) and emissions (gCO2e), last day, per pod",
                "table",
                (
                    f"namespace_pod:falcon_gpu_energy_kwh:1d{{{CP}}}",
                    f"namespace_pod:falcon_gpu_emissions_grams:1d{{{CP}}}",
                ),
                width=8,
                description=CARBON_NOTE,
            ),
            Panel(
                "Energy (kWh) and emissions (gCO2e), last day, per workload",
                "table",
                (
                    f"namespace_workload:falcon_gpu_energy_kwh:1d{{{CS}}}",
                    f"namespace_workload:falcon_gpu_emissions_grams:1d{{{CS}}}",
                ),
                width=8,
                description=CARBON_NOTE
                + " A workload is the pods' controller (or the pod name without its generated suffix):"
                " a restarted pod counts in the same one.",
            ),
            Panel(
                "Last hour: GPU-hours allocated and used, energy (J)",
                "table",
                (
                    f"namespace:falcon_gpu_allocated_gpu_hours:1h{{{CS}}}",
                    f"namespace:falcon_gpu_used_gpu_hours:1h{{{CS}}}",
                    f"namespace:falcon_gpu_energy_joules:1h{{{CS}}}",
                ),
            ),
        ],
    )


BOARDS = (cluster, node, pods, health, cost)


def files() -> dict[Path, str]:
    out = {}
    for make in BOARDS:
        board = make()
        out[OUT / f"{board.uid.removeprefix('falcon-gpu-')}.json"] = (
            json.dumps(render(board), indent=2) + "\n"
        )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a committed file differs")
    args = parser.parse_args()
    stale = []
    for path, text in files().items():
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(path.name)
        else:
            path.write_text(text)
    if stale:
        print(f"out of date: {', '.join(stale)}; run python scripts/gen_dashboards.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
