"""The energy and carbon recording rules (``falcon_gpu_carbon`` group), written for two windows.

Why written rather than typed: the same five answers (per namespace, pod, workload, Slurm job and
Slurm user; kWh and gCO2e) for each window (1h, 1d) are 27 rules whose expressions differ only in
their labels and window; one function writes them alike (``scripts/gen_answer_rules.py``).

Energy over a window is the agent's own counter's last value in the window minus its value at
the window's start (0 for a series born in the window: the agent's counters start at 0), not
``increase()``: ``increase`` extrapolates to the window's edges, so a namespace's kWh would not
equal the sum of what its pods were attributed. A counter that was reset in the window (an agent
restart) falls back to ``increase()``, which adds up across the reset (and extrapolates, slightly).
A pod that ended within the window counts up to its last sample.

A workload (what survives a pod's restarts: its controller, else its name without the generated
suffix) is a label of ``falcon_gpu_pod_info`` only, so the per-workload rules join each pod's kWh to
the workload its ``pod_info`` carried in the window. Should one pod have carried two (its owner read
from the API only after its first cycles), the one it carried in more samples counts: the join
needs one per pod, or the rule would fail for every workload.
"""

from __future__ import annotations

from falcon_gpu.readings.units import JOULES, KILOWATT_HOURS, divisor

BEGIN = "  # -- BEGIN carbon rules: written by scripts/gen_answer_rules.py from falcon_gpu/carbon/rules.py --"
END = "  # -- END carbon rules --"

INTENSITY_RULE = "node:falcon_gpu_carbon_intensity:grams_per_kwh"
INTENSITY_SERIES = "falcon_gpu_carbon_intensity_grams_per_kwh"
"""What the agent publishes when the setting is a number (falcon_gpu/schemas/falcon_gpu_carbon.py)."""
WINDOWS = ("1h", "1d")
_JOULES_PER_KWH = f"{divisor(JOULES, KILOWATT_HOURS):.0f}"

# (node-level name, its labels, the agent's counter, the counter's identity labels, its roll-ups)
_SOURCES = (
    (
        "node_namespace_pod",
        "cluster, node, namespace, pod",
        "falcon_gpu_pod_energy_joules_total",
        "cluster, node, uuid, mig_uuid, namespace, pod, container",
        (("namespace_pod", "cluster, namespace, pod"), ("namespace", "cluster, namespace")),
    ),
    (
        "node_slurm_job",
        "cluster, node, slurm_job, uid, user",
        "falcon_gpu_slurm_job_energy_joules_total",
        "cluster, node, uuid, mig_uuid, slurm_job, slurm_step, uid, user",
        (("slurm_job", "cluster, slurm_job, uid, user"), ("slurm_user", "cluster, uid, user")),
    ),
)


def energy_joules(counter: str, identity: str, window: str) -> str:
    """PromQL: the joules each series of ``counter`` gained over ``window`` (see the module doc)."""
    last = f"max by ({identity}) (last_over_time({counter}[{window}]))"
    start = f"max by ({identity}) ({counter} offset {window})"
    reset = f"max by ({identity}) (resets({counter}[{window}])) > 0"
    grown = f"max by ({identity}) (increase({counter}[{window}]))"
    return f"({last} - ({start} or 0 * {last}) unless {reset})\nor {grown}"


_POD_INFO = "falcon_gpu_pod_info"
_POD_KEY = "cluster, node, namespace, pod"
_WORKLOAD_LABELS = "cluster, namespace, workload"


def _workload_rules(window: str) -> list[str]:
    """Each pod's workload over ``window`` (1 per pod), and kWh and gCO2e per workload through it."""
    pod_kwh = f"node_namespace_pod:falcon_gpu_energy_kwh:{window}"
    workload_of = f"node_namespace_pod_workload:{_POD_INFO}:{window}"
    seen = f'sum by ({_POD_KEY}, workload) (count_over_time({_POD_INFO}{{workload!=""}}[{window}]))'
    join = f"* on ({_POD_KEY}) group_left (workload) {workload_of}"
    emitted = f"{pod_kwh} * on (cluster, node) group_left {INTENSITY_RULE}"
    return [
        *_rule(workload_of, f"clamp_max(\n  topk by ({_POD_KEY}) (\n    1, {seen}\n  ),\n  1\n)"),
        *_rule(
            f"namespace_workload:falcon_gpu_energy_kwh:{window}",
            f"sum by ({_WORKLOAD_LABELS}) (\n  {pod_kwh}\n  {join}\n)",
        ),
        *_rule(
            f"namespace_workload:falcon_gpu_emissions_grams:{window}",
            f"sum by ({_WORKLOAD_LABELS}) (\n  {emitted}\n  {join}\n)",
        ),
    ]


def _rule(record: str, expr: str) -> list[str]:
    return [
        f"      - record: {record}",
        "        expr: |",
        *(f"          {line}" for line in expr.splitlines()),
    ]


def group_text() -> str:
    """The ``falcon_gpu_carbon`` group, between the markers, as it sits in recording.yml."""
    lines = [
        BEGIN,
        "  # Energy (kWh) and emissions (gCO2e) per namespace, pod, workload (a pod's falcon_gpu_pod_info",
        "  # label), Slurm job and Slurm user, over the last hour and day (docs/DASHBOARDS.md, 'Energy and",
        "  # carbon per team'). The energy is the agent's own attributed counters; emissions multiply it by",
        "  # each node's carbon intensity. To use a series in the store instead of the carbon_intensity",
        "  # setting's number, write it in the first rule, e.g.",
        f"  #   {INTENSITY_RULE} =",
        "  #     max by (cluster, node) (0 * falcon_gpu_info) + on () group_left max (grid_intensity)",
        "  # The intensity is each node's latest of the last day: a pod on a node gone since still counts.",
        "  - name: falcon_gpu_carbon",
        "    rules:",
        *_rule(
            INTENSITY_RULE,
            f"max by (cluster, node) (last_over_time({INTENSITY_SERIES}[1d]))",
        ),
    ]
    for window in WINDOWS:
        for node_level, node_labels, counter, identity, rollups in _SOURCES:
            node_kwh = f"{node_level}:falcon_gpu_energy_kwh:{window}"
            joules = energy_joules(counter, identity, window)
            joules = joules.replace("\n", "\n  ")
            lines += _rule(node_kwh, f"sum by ({node_labels}) (\n  {joules}\n) / {_JOULES_PER_KWH}")
            for level, labels in rollups:
                lines += _rule(f"{level}:falcon_gpu_energy_kwh:{window}", f"sum by ({labels}) ({node_kwh})")
                emitted = f"{node_kwh} * on (cluster, node) group_left {INTENSITY_RULE}"
                lines += _rule(
                    f"{level}:falcon_gpu_emissions_grams:{window}", f"sum by ({labels}) (\n  {emitted}\n)"
                )
        lines += _workload_rules(window)
    lines.append(END)
    return "\n".join(lines) + "\n"
