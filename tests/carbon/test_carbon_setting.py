"""The ``carbon_intensity`` setting, the emissions of a job record, and the generated carbon rules."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from falcon_gpu.carbon import check_carbon_intensity, emissions_grams, grams_per_kwh
from falcon_gpu.jobs.records_file import JobLog
from falcon_gpu.jobs.state import StateFile
from falcon_gpu.jobs.tracker import JobTracker
from falcon_gpu.model.jobs import JobGroup, JobRecord
from falcon_gpu.schemas import falcon_gpu_jobs
from falcon_gpu.settings import Settings
from falcon_gpu.settings_resolved import ResolvedSettings
from tests.jobs.helpers import Feeder, use

ROOT = Path(__file__).resolve().parents[2]


def run_once(tmp_path: Path, value: str) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "c.toml"
    config.write_text(f'carbon_intensity = {value}\n[[sinks]]\ntype = "stdout"\n')
    argv = [sys.executable, "-m", "falcon_gpu", "run", "--once", "--simulate", "--config", str(config)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=ROOT)


@pytest.mark.parametrize("value", ['"1kg"', "-3", "1e9", "true", '"nan"'])
def test_a_bad_value_exits_2_naming_the_setting(tmp_path: Path, value: str) -> None:
    done = run_once(tmp_path, value)
    assert done.returncode == 2
    assert "setting 'carbon_intensity'" in done.stderr


def test_a_number_is_published_and_a_series_name_is_not(tmp_path: Path) -> None:
    number = run_once(tmp_path, "400")
    assert number.returncode == 0, number.stderr
    assert 'falcon_gpu_carbon_intensity_grams_per_kwh{node="' in number.stdout
    assert [
        line.split()[-1] for line in number.stdout.splitlines() if line.startswith("falcon_gpu_carbon")
    ] == ["400"]
    named = run_once(tmp_path, '"grid_carbon_intensity"')
    assert named.returncode == 0, named.stderr
    assert "falcon_gpu_carbon_intensity" not in named.stdout


def test_values() -> None:
    assert check_carbon_intensity(" 250 ") == 250.0  # as the environment gives it
    assert check_carbon_intensity(0) == 0.0
    assert check_carbon_intensity("electricitymaps:carbon_intensity") == "electricitymaps:carbon_intensity"
    assert grams_per_kwh(250.0) == 250.0
    assert grams_per_kwh("grid") is None and grams_per_kwh(None) is None
    assert emissions_grams(7_200_000, 400) == 800.0  # 2 kWh at 400 g


def test_a_job_record_carries_its_energy_times_the_intensity(tmp_path: Path) -> None:
    feeder = Feeder(tmp_path)
    feeder.tracker = JobTracker(
        "node-a", JobLog(tmp_path), StateFile(tmp_path), feeder.telemetry, carbon_intensity=400.0
    )
    for joules in (0.0, 3_600_000.0, 5_400_000.0):
        feeder.cycle([use("main", energy=joules)])
    (record,) = feeder.cycle([]).finished
    assert record.energy_joules == 5_400_000.0
    assert record.emissions_grams == 600.0  # 1.5 kWh x 400 g
    assert JobRecord.from_json(record.as_json()) == record

    plain = Feeder(tmp_path / "plain")
    for joules in (0.0, 3_600_000.0):
        plain.cycle([use("main", energy=joules)])
    (unset,) = plain.cycle([]).finished
    assert unset.emissions_grams is None and unset.as_json()["emissions_grams"] is None


@pytest.mark.parametrize("value", [400, "grid_intensity", None])
def test_the_plugins_cached_settings_keep_it(value: float | str | None) -> None:
    resolved = ResolvedSettings.of(Settings(carbon_intensity=value))
    again = ResolvedSettings.from_json(json.loads(json.dumps(resolved.to_json())))
    assert again.carbon_intensity == resolved.carbon_intensity == (400.0 if value == 400 else value)


def test_the_committed_rules_are_what_the_generator_writes() -> None:
    answer = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_answer_rules.py"), "--check"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert answer.returncode == 0, answer.stderr


def test_the_job_groups_carry_the_emissions_only_when_known(tmp_path: Path) -> None:
    feeder = Feeder(tmp_path)
    feeder.tracker = JobTracker(
        "node-a", JobLog(tmp_path), StateFile(tmp_path), feeder.telemetry, carbon_intensity=250.0
    )
    for joules in (0.0, 7_200_000.0):
        feeder.cycle([use("main", energy=joules)])
    update = feeder.cycle([])
    (group,) = falcon_gpu_jobs.render(update.groups, 1000.0)
    families = {f.name: f for f in group.batch.families}
    assert [s.value for s in families["falcon_gpu_job_record_emissions_grams"].series] == [
        500.0
    ]  # 2 kWh x 250 g
    plain = msgspec.structs.replace(update.finished[0], emissions_grams=None)
    unknown = falcon_gpu_jobs.group(JobGroup("ml", "train-0", (plain,)), 0).batch.families
    assert "falcon_gpu_job_record_emissions_grams" not in {f.name for f in unknown}
