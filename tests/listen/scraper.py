"""The real Prometheus, started to scrape (not to receive): the scrape jobs are the caller's."""

from __future__ import annotations

from pathlib import Path

from tests.delivery.conftest import ManagedServer, free_port, need


def start_scraper(tmp_path: Path, scrape_configs: str) -> ManagedServer:
    """Prometheus scraping every second with ``scrape_configs`` (YAML list items, indented 2)."""
    binary = need("prometheus")
    port = free_port()
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text("global: {scrape_interval: 1s, scrape_timeout: 1s}\nscrape_configs:\n" + scrape_configs)
    server = ManagedServer(
        [binary, f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        f"http://127.0.0.1:{port}/-/ready", f"http://127.0.0.1:{port}", tmp_path / "prometheus.log",
    )  # fmt: skip
    server.start()
    return server
