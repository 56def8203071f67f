"""The open jobs, saved across an agent restart: ``open-jobs.json`` under ``jobs_dir``.

Written whole to a temporary file and renamed over the old one, so a crash
leaves either the previous or the new state, never half of one. Besides the
open jobs it keeps each pod's latest records, because a Pushgateway group is
replaced whole by a PUT: after a restart the next record of a pod must go out
with its earlier ones. A state that cannot be read or parsed is logged and
ignored (the agent starts with no open jobs rather than not at all).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from falcon_gpu.jobs.open_job import OpenJob
from falcon_gpu.model.jobs import JobRecord

log = logging.getLogger(__name__)

FILE_NAME = "open-jobs.json"
VERSION = 1


class StateFile:
    def __init__(self, directory: Path) -> None:
        self.path = directory / FILE_NAME

    def load(self) -> tuple[list[OpenJob], list[JobRecord]]:
        try:
            data: Any = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            return [], []
        except (OSError, ValueError) as exc:
            log.warning(
                "job records: ignoring unreadable %s (%s); starting with no open jobs", self.path, exc
            )
            return [], []
        try:
            if data.get("version") != VERSION:
                raise ValueError(f"version {data.get('version')!r}, expected {VERSION}")
            jobs = [OpenJob.from_state(j) for j in data["open"]]
            recent = [JobRecord.from_json(r) for r in data.get("recent", ())]
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            log.warning(
                "job records: ignoring %s, not a saved state (%r); starting with no open jobs", self.path, exc
            )
            return [], []
        return jobs, recent

    def save(self, jobs: list[OpenJob], recent: list[JobRecord]) -> None:
        """Raises OSError."""
        body = {
            "version": VERSION,
            "open": [j.as_state() for j in jobs],
            "recent": [r.as_json() for r in recent],
        }
        tmp = self.path.with_name(f".{FILE_NAME}.{os.getpid()}.tmp")
        try:
            tmp.write_bytes(json.dumps(body, separators=(",", ":")).encode())
            os.replace(tmp, self.path)
        except OSError:
            tmp.unlink(missing_ok=True)
            raise
