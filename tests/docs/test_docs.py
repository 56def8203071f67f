"""The user documentation answers what it promises: a README that leads (short), links that lead
somewhere, references that cover every setting and every published series, and no pointer into
the project's own contract, which a user's clone does not have."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import typing
from pathlib import Path

import pytest

from falcon_gpu.policies.config import PolicyConfig
from falcon_gpu.readings.device import BOARD, INTERCONNECT
from falcon_gpu.schemas import dcgm, falcon_gpu, profiles
from falcon_gpu.schemas.falcon_gpu_jobs import SPECS as JOB_RECORD_SPECS
from falcon_gpu.settings import Settings
from falcon_gpu.simulator.scenario.parse import parse_scenario
from falcon_gpu.sinks.config import SinkConfig

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
USER_DOCS = sorted([REPO / "README.md", REPO / "CHANGELOG.md", *DOCS.glob("*.md")])
README_MAX_BYTES = 15 * 1024

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_TABLE_KEY = re.compile(r"^\|\s*`([^`]+)`")


def _prose(path: Path) -> list[str]:
    """The lines outside fenced code blocks (a `# comment` in a shell block is no heading)."""
    out, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append(line)
    return out


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces to '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in _prose(path):
        if m := _HEADING.match(line):
            slug = _slug(m.group(2))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _links(path: Path) -> list[str]:
    return [
        target
        for line in _prose(path)
        for target in _LINK.findall(re.sub(r"`[^`]*`", "", line))
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target)  # http:, https:, mailto:
    ]


def test_readme_leads_within_15_kib() -> None:
    size = len((REPO / "README.md").read_bytes())
    assert size <= README_MAX_BYTES, f"README.md: {size} bytes > {README_MAX_BYTES}; move detail to docs/"


@pytest.mark.parametrize("doc", [REPO / "README.md", *sorted(DOCS.glob("*.md"))], ids=lambda p: p.name)
def test_every_relative_link_resolves(doc: Path) -> None:
    broken = []
    for target in _links(doc):
        file_part, _, anchor = target.partition("#")
        dest = (doc.parent / file_part).resolve() if file_part else doc
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target}: no heading with anchor #{anchor} in {dest.name}")
    assert not broken, f"{doc.name}: " + "; ".join(broken)


@pytest.mark.parametrize("doc", USER_DOCS, ids=lambda p: p.name)
def test_no_user_doc_points_into_the_project_contract(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    found = [word for word in ("../shared", "CONTRACT") if word in text]
    assert not found, f"{doc.name} mentions {found}: users have neither; point into docs/ instead"


def _documented_keys(section_start: str, section_end: str | None) -> set[str]:
    """The first-column keys of every table between two headings of docs/SETTINGS.md."""
    lines = _prose(DOCS / "SETTINGS.md")
    start = next(i for i, line in enumerate(lines) if line.startswith(section_start))
    ends = [i for i, line in enumerate(lines) if section_end and line.startswith(section_end)]
    end = ends[0] if ends else len(lines)
    return {m.group(1) for line in lines[start:end] if (m := _TABLE_KEY.match(line))}


def _sink_models() -> tuple[type[typing.Any], ...]:
    return typing.get_args(typing.get_args(SinkConfig)[0])


def test_every_setting_has_a_row_in_settings_md() -> None:
    keys = {field.alias or name for name, field in Settings.model_fields.items()}
    missing = keys - _documented_keys("## The agent's settings", "## Sinks")
    assert not missing, f"settings without a row in docs/SETTINGS.md: {sorted(missing)}"


def test_every_sink_key_has_a_row_in_settings_md() -> None:
    keys = {field.alias or name for model in _sink_models() for name, field in model.model_fields.items()}
    missing = keys - _documented_keys("### Every sink key", "## Policies")
    assert not missing, f"sink keys without a row in docs/SETTINGS.md: {sorted(missing)}"


def test_every_policy_key_has_a_row_in_settings_md() -> None:
    keys = {field.alias or name for name, field in PolicyConfig.model_fields.items()}
    missing = keys - _documented_keys("## Policies", None)
    assert not missing, f"policy keys without a row in docs/SETTINGS.md: {sorted(missing)}"


def _golden_families() -> set[str]:
    names = set()
    golden = REPO / "tests" / "golden"
    for prom in golden.glob("*/*.prom"):
        for line in prom.read_text(encoding="utf-8").splitlines():
            if line.startswith("# TYPE "):
                names.add(line.split()[2])
    for items in golden.glob("*/openfalcon.json"):
        cycles = json.loads(items.read_text(encoding="utf-8"))
        names.update(item["metric"] for cycle in cycles for item in cycle)
    return names


def test_every_golden_family_is_in_metrics_md() -> None:
    families = _golden_families()
    assert len(families) > 100, "the golden files were not found or not parsed"
    families |= {spec.name for spec in JOB_RECORD_SPECS}  # Pushgateway's job groups: in no golden file
    rows = {m.group(1) for line in _prose(DOCS / "METRICS.md") if (m := _TABLE_KEY.match(line))}
    missing = families - rows
    assert not missing, f"series without a row in docs/METRICS.md: {sorted(missing)}"


def _profile_of(family: str) -> str:
    """What the reference's *profile* cell must say of ``family`` (schemas/profiles.py)."""
    if family in profiles.DEFAULT_ONLY:
        return "default only"
    if family in falcon_gpu.NAMES or family in dcgm.NAMES:
        if family not in falcon_gpu.LEAN | dcgm.LEAN:
            return "full"
        return "default, while not 0" if family in profiles.SPARSE else "default"
    return "default"  # nvidia_smi, Open-Falcon and the job records have one set


def test_every_golden_familys_row_names_its_profile() -> None:
    """The reference's second column is the profile: what the code emits it in."""
    lines = _prose(DOCS / "METRICS.md")
    reference = lines[lines.index("## Reference: every series") :]
    rows = {m.group(1): line for line in reversed(reference) if (m := _TABLE_KEY.match(line))}
    families = _golden_families() | {spec.name for spec in JOB_RECORD_SPECS}
    wrong = {
        family: cell
        for family in sorted(families)
        if (cell := rows[family].split("|")[2].strip()) != _profile_of(family)
    }
    assert not wrong, f"docs/METRICS.md rows whose profile column is not the family's profile: {wrong}"
    assert {_profile_of(f) for f in families} == {"default", "default, while not 0", "default only", "full"}


def _rows(doc: str) -> dict[str, str]:
    """First-column key -> the whole table row, for every table row of a doc (first row wins)."""
    out: dict[str, str] = {}
    for line in _prose(DOCS / doc):
        if m := _TABLE_KEY.match(line):
            out.setdefault(m.group(1), line)
    return out


def test_metrics_md_rows_say_what_the_readings_table_says() -> None:
    """The reference is derived from readings/device.py: each scalar series' row names the NVML
    call it comes from and the dcgm-exporter name it replaces, as the table declares them."""
    rows = _rows("METRICS.md")
    wrong = []
    for reading in (*BOARD, *INTERCONNECT):
        if reading.falcon_gpu is None or reading.falcon_gpu.name not in rows:
            continue
        row = rows[reading.falcon_gpu.name]
        wants = [reading.dcgm.name if reading.dcgm else None, reading.nvml.call if reading.nvml else None]
        wrong += [f"{reading.falcon_gpu.name}: {w}" for w in wants if w and f"`{w}`" not in row]
    assert not wrong, f"docs/METRICS.md rows that disagree with readings/device.py: {wrong}"


def _shown(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def test_settings_md_defaults_are_the_models_defaults() -> None:
    rows = _rows("SETTINGS.md")
    wrong = []
    for name, field in Settings.model_fields.items():
        key = field.alias or name
        default = field.default
        if isinstance(default, (bool, int, float, Path)) or (isinstance(default, str) and default):
            cell = re.split(r"(?<!\\)\|", rows[key])[3]  # columns: key, type, default
            if _shown(default) not in cell:
                wrong.append(f"{key}: {_shown(default)} not in {cell.strip()!r}")
    assert not wrong, f"docs/SETTINGS.md defaults that differ from settings.py: {wrong}"


def test_readme_kustomization_renders_with_the_image_and_config(tmp_path: Path) -> None:
    """The README's Kubernetes steps, as written: its kustomization renders the DaemonSet with the
    user's image and the user's TOML."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: `kubectl kustomize` renders the overlays")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    m = re.search(r"cat > falcon-gpu-prod/kustomization.yaml <<'EOF'\n(.*?)\nEOF\n", readme, re.S)
    assert m, "README.md lost its kustomization"
    (tmp_path / "conf").symlink_to(REPO / "conf")
    prod = tmp_path / "falcon-gpu-prod"
    prod.mkdir()
    (prod / "falcon-gpu.toml").write_text('interval = 17\n[[sinks]]\ntype = "stdout"\n')
    (prod / "kustomization.yaml").write_text(m.group(1))
    out = subprocess.run([kubectl, "kustomize", str(prod)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "image: registry.example.com/falcon-gpu:0.1.0" in out.stdout
    assert "interval = 17" in out.stdout


def test_scenarios_md_example_is_a_scenario_and_every_number_key_is_listed() -> None:
    text = (DOCS / "SCENARIOS.md").read_text(encoding="utf-8")
    example = re.search(r"```json\n(.*?)```", text, re.S)
    assert example, "docs/SCENARIOS.md lost its example"
    scenario = parse_scenario(json.loads(example.group(1)))
    assert scenario.gpus and scenario.gpus[0].processes and scenario.gpus[0].mig
    rows = _rows("SCENARIOS.md")
    keys = {
        f"{r.sim.group}.{r.sim.key}" if r.sim.group else r.sim.key for r in (*BOARD, *INTERCONNECT) if r.sim
    }
    missing = keys - set(rows)
    assert not missing, f"scenario keys without a row in docs/SCENARIOS.md: {sorted(missing)}"
