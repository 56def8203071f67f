"""One ``doctor`` row: ``(check, status, detail)``, the detail saying what to fix.

``SKIP`` is "not applicable here" (no GPU processes to attribute, no Kubernetes on
a bare-metal host), so that a row reads ``OK`` only when something was checked.
Only ``FAIL`` makes doctor exit 1.
"""

from __future__ import annotations

from typing import Literal

Status = Literal["OK", "WARN", "FAIL", "SKIP"]
Row = tuple[str, Status, str]
OK: Status = "OK"
WARN: Status = "WARN"
FAIL: Status = "FAIL"
SKIP: Status = "SKIP"


def verdict(ok: bool) -> Status:
    return OK if ok else FAIL
