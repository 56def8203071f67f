"""The recipe "add a reading" (docs/ARCHITECTURE.md), walked: two readings added to a copy of the reading
table (a field value, and a function with an argument), nothing else edited, and the snapshot, the
simulator, the expected values and the three Prometheus schemas follow.

The table is read at import by every module that takes from it, so the walk runs in a fresh interpreter
that swaps the table before it imports anything else (no file is edited)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

WALK = textwrap.dedent(
    """
    import json

    import pynvml

    from falcon_gpu.readings import device as table
    from falcon_gpu.readings.spec import SINT, UINT, Nvml, Publish, Reading, Simulated
    from falcon_gpu.readings.units import CELSIUS, HERTZ, MEGAHERTZ

    NEW = (
        Reading(
            "gpu_max_tlimit_celsius", float, CELSIUS, "thermal_power", "Max operating T.Limit.",
            nvml=Nvml(CELSIUS, field_ids=(pynvml.NVML_FI_DEV_TEMPERATURE_GPU_MAX_TLIMIT,), value_type=SINT),
            sim=Simulated("gpu_max_tlimit_celsius", CELSIUS),
            falcon_gpu=Publish("falcon_gpu_gpu_max_tlimit_celsius", CELSIUS, "T.Limit, maximum operating."),
            dcgm=Publish("DCGM_FI_DEV_GPU_MAX_OP_TEMP", CELSIUS, "Maximum operating temperature T.Limit."),
            nvidia_smi=Publish("nvidia_smi_temperature_gpu_max_tlimit_celsius", CELSIUS, "T.Limit."),
        ),
        Reading(
            "graphics_clock_hertz", float, HERTZ, "clocks", "Graphics clock.",
            nvml=Nvml(MEGAHERTZ, call="nvmlDeviceGetClockInfo", args=(pynvml.NVML_CLOCK_GRAPHICS,),
                      value_type=UINT),
            sim=Simulated("graphics_clock_mhz", MEGAHERTZ),
            falcon_gpu=Publish("falcon_gpu_graphics_clock_hertz", HERTZ, "Graphics clock."),
            dcgm=Publish("DCGM_FI_DEV_GRAPHICS_CLOCK", MEGAHERTZ, "Graphics clock (in MHz)."),
            nvidia_smi=Publish("nvidia_smi_clocks_current_graphics_clock_hz", HERTZ, "Graphics clock."),
        ),
    )
    table.BOARD = table.BOARD + NEW
    table.READINGS = table.BOARD + table.INTERCONNECT
    table.BY_FIELD = {r.field: r for r in table.READINGS}

    from falcon_gpu.model.attribution import Attribution
    from falcon_gpu.model.cycle import CycleData
    from falcon_gpu.schemas import dcgm, falcon_gpu, nvidia_smi
    from falcon_gpu.simulator.nvml.library import SimulatedNvml
    from falcon_gpu.sinks.encoding import prom_text
    from tests.nvml.helpers import expected_device, gpu, scenario_of, source_on

    added = gpu(gpu_max_tlimit_celsius=[-5, -4], graphics_clock_mhz=[1200, 1410])
    scenario = scenario_of(added, gpu("GPU-b"))
    sim = SimulatedNvml(scenario)
    source, telemetry = source_on(sim)
    out = {"devices": [], "expected": [], "series": {}, "errors": None, "calls": []}
    for cycle in range(2):
        snap = source.collect(1000.0 + cycle)
        out["calls"].append(sim.calls["nvmlDeviceGetFieldValues"])
        out["devices"].append([[d.gpu_max_tlimit_celsius, d.graphics_clock_hertz] for d in snap.devices])
        out["expected"].append(
            [[want["gpu_max_tlimit_celsius"], want["graphics_clock_hertz"]]
             for want in (expected_device(g, cycle) for g in scenario.gpus)]
        )
        data = CycleData("n1", 30, snap, Attribution(), {}, telemetry.view())
        for name, schema in (("falcon_gpu", falcon_gpu), ("dcgm", dcgm), ("nvidia_smi", nvidia_smi)):
            out["series"][name] = [
                line for line in prom_text.encode(schema.render(data)).splitlines()
                if any(n in line for n in ("max_tlimit", "MAX_OP_TEMP", "graphics_clock", "GRAPHICS_CLOCK"))
                and not line.startswith("#")
            ]
    out["errors"] = telemetry.view().errors_total
    print(json.dumps(out))
    """
)


def test_a_reading_added_to_the_table_is_read_simulated_expected_and_published() -> None:
    done = subprocess.run(
        [sys.executable, "-c", WALK], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    # the snapshot: from the field value (signed) and the function (MHz -> Hz); GPU-b has neither key
    assert got["devices"] == [[[-5.0, 1.2e9], [None, None]], [[-4.0, 1.41e9], [None, None]]]
    assert got["expected"] == got["devices"]  # tests/nvml/helpers follows the table too
    # the new field rides in the one call per GPU and cycle (GPU-b, which answers no field, is not asked)
    assert got["calls"][1] - got["calls"][0] == 1
    assert got["errors"] == {}
    series = got["series"]
    assert [s.split("{")[0] + " " + s.rsplit(" ", 1)[1] for s in series["falcon_gpu"]] == [
        "falcon_gpu_gpu_max_tlimit_celsius -4",
        "falcon_gpu_graphics_clock_hertz 1410000000",
    ]
    assert sorted(s.split("{")[0] + " " + s.rsplit(" ", 1)[1] for s in series["dcgm"]) == [
        "DCGM_FI_DEV_GPU_MAX_OP_TEMP -4",
        "DCGM_FI_DEV_GRAPHICS_CLOCK 1410",
    ]
    assert sorted(s.split("{")[0] + " " + s.rsplit(" ", 1)[1] for s in series["nvidia_smi"]) == [
        "nvidia_smi_clocks_current_graphics_clock_hz 1410000000",
        "nvidia_smi_temperature_gpu_max_tlimit_celsius -4",
    ]
