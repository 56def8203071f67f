"""Every TOML example in the docs is a valid configuration (copy-paste must work)."""

from __future__ import annotations

import re
from pathlib import Path

import certifi
import pytest

from falcon_gpu.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"```toml\n(.*?)```", re.S)


def examples() -> list[tuple[str, str]]:
    out = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        doc = path.relative_to(ROOT).as_posix()
        out += [(f"{doc}#{i}", b) for i, b in enumerate(BLOCK.findall(path.read_text()))]
    out.append(("conf/falcon-gpu.toml", (ROOT / "conf/falcon-gpu.toml").read_text()))
    return out


@pytest.mark.parametrize(("where", "text"), examples(), ids=[w for w, _ in examples()])
def test_example_is_valid_configuration(where: str, text: str, tmp_path: Path) -> None:
    cfg = tmp_path / "example.toml"
    # a ca_file must exist and parse at start: point the examples' paths at a real bundle
    cfg.write_text(re.sub(r'ca_file = "[^"]*"', f'ca_file = "{certifi.where()}"', text))
    settings = load_settings(cfg)
    assert settings.sinks, where


def test_docs_have_an_example_for_every_sink_type() -> None:
    """One copy-paste example per destination, where the README sends users for them."""
    assert "docs/SINKS.md#copy-paste-examples" in (ROOT / "README.md").read_text()
    sinks = (ROOT / "docs" / "SINKS.md").read_text()
    for sink_type in ("stdout", "falcon_agent", "falcon_transfer", "pushgateway", "remote_write"):
        assert f'type = "{sink_type}"' in sinks or sink_type == "stdout", sink_type
    assert "X-Scope-OrgID" in sinks and "/openfalcon/push" in sinks
