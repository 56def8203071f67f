"""The energy and carbon recording rules (``falcon_gpu_carbon`` group), written for two windows.

Why written rather than typed: the same four answers (per namespace, pod, Slurm job and Slurm
user; kWh and gCO2e) for each window (1h, 1d) are 26 rules whose expressions differ only in
their labels and window; one function writes them alike (``scripts/gen_answer_rules.py``).

Energy over a window is the agent's own counter's last value in the window minus its value at
the window's start (0 for a series born in the window: the agent's counters start at 0), not
``increase()``: ``increase`` extrapolates to the window's edges, so a namespace's kWh would not
equal the sum of what its pods were attributed. A counter that was reset in the window (an agent
restart) falls back to ``increase()``, which adds up across the reset (and extrapolates, slightly).
A pod that ended within the window counts up to its last sample.
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
        "  # Energy (kWh) and emissions (gCO2e) per namespace, pod, Slurm job and Slurm user, over the last",
        "  # hour and day (docs/DASHBOARDS.md, 'Energy and carbon per team'). The energy is the agent's own",
        "  # attributed counters; emissions multiply it by each node's carbon intensity. To use a series in",
        "  # the store instead of the carbon_intensity setting's number, write it in the first rule, e.g.",
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
    lines.append(END)
    return "\n".join(lines) + "\n"
