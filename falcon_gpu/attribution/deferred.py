"""A registry source whose module is not imported yet: it stands in until the source applies.

:class:`~falcon_gpu.attribution.registry.SourceEntry` hands one out when its cheap test says
the source does not apply at start-up (no kubelet socket, no Docker data root, no label
setting). It is quiet as the real source would be there: not expected, no answers. Each
background refresh asks the test again, and the first time it passes the module is imported and
the real source built; from then on every call goes to it. ``doctor`` builds it at once, so its
rows (SKIP with the reason) read as they always did.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from falcon_gpu.attribution.source import EMPTY, AttributionSource, SourceContext, SourceView
from falcon_gpu.checks import Row

if TYPE_CHECKING:
    from falcon_gpu.attribution.registry import SourceEntry


class DeferredSource:
    """An :class:`~falcon_gpu.attribution.source.AttributionSource` built on first use."""

    def __init__(self, entry: SourceEntry, context: SourceContext) -> None:
        self.name = entry.name
        self.period = context.settings.refresh_period if entry.period is None else entry.period
        self.min_gap = entry.min_gap
        self._entry = entry
        self._context = context
        self._real: AttributionSource | None = None
        self._absent = False
        """Its ``build`` returned None: not configured here, for good (settings do not change)."""
        self._building = threading.Lock()
        """The refresher's thread and ``doctor`` may both build it: one source, never two."""

    def _load(self) -> AttributionSource | None:
        with self._building:
            if self._real is None and not self._absent:
                self._real = self._entry.load()(self._context)
                self._absent = self._real is None
            return self._real

    def expected(self) -> bool:
        if self._real is None and not self._entry.applies(self._context.settings):
            return False
        real = self._load()
        return real is not None and real.expected()

    def refresh(self) -> None:
        real = self._load()
        if real is not None:
            real.refresh()

    def recovered(self) -> str:
        real = self._load()
        return f"{self.name} works again" if real is None else real.recovered()

    def view(self) -> SourceView:
        real = self._real
        return EMPTY if real is None else real.view()

    def diagnose(self) -> tuple[list[Row], SourceView]:
        real = self._load()
        return ([], EMPTY) if real is None else real.diagnose()

    def close(self) -> None:
        real = self._real
        if real is not None:
            real.close()
