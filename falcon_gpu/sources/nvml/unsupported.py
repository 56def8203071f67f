"""What the GPUs do not support, said once per GPU model instead of once per GPU and field.

NVML answers NOT_SUPPORTED for what a board does not have (an SXM GPU's fan, PCIe byte counters on
a driver without them, links beyond the ones it has); the caller remembers each answer and never
asks again (:class:`~falcon_gpu.sources.nvml.calls.NvmlCaller`). Logging each one at INFO put 64-88
lines on an 8-GPU node's every one-shot command (``run --once``, ``plugin``, ``doctor``, ``top
--once``), all saying the same of identical GPUs. So each answer goes to DEBUG as it comes (the
details: which GPU, which field), and once a cycle :meth:`UnsupportedLog.report` says at INFO, per
GPU model, what it lacks that was not said before: at most one line per model on the first cycle,
and later only when a model turns out to lack something new (a reading asked only once a minute).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

log = logging.getLogger("falcon_gpu.nvml")

MAX_MODELS = 64
"""Models whose lacks are remembered (a node has one or two; the bound keeps the set bounded)."""
MAX_PENDING = 100_000
"""Answers kept between two reports (one cycle's worth is at most GPUs x fields)."""


class UnsupportedLog:
    """The NOT_SUPPORTED answers of one library's caller, to be said per GPU model."""

    def __init__(self) -> None:
        self._pending: list[tuple[str, str]] = []
        self._said: dict[str, set[str]] = {}
        """Per model, what it was said to lack."""

    def note(self, scope: str, what: str) -> None:
        """``scope`` (a GPU's UUID, ``gpu<index>``, a MIG instance ``<uuid>/gi<id>``, ``system``)
        does not support ``what`` (a field name, or a summary such as "48 NVLink fields")."""
        log.debug("NVML: %s is not supported on %s; not asking again", what, scope)
        if len(self._pending) < MAX_PENDING:
            self._pending.append((scope, what))

    @property
    def pending(self) -> bool:
        """Whether something was noted since the last report."""
        return bool(self._pending)

    def report(self, model_of: Callable[[str], str | None], gpus_of: Callable[[str], int]) -> None:
        """One INFO line per model for what it was found to lack since the last report and was not
        said before; ``model_of`` names the model of a GPU scope (None: not a GPU, said as is),
        ``gpus_of`` how many GPUs of that model the node has (what only some lack says on how many)."""
        if not self._pending:
            return
        lacks: dict[str, dict[str, set[str]]] = {}
        for scope, what in self._pending:
            gpu = scope.partition("/")[0]  # a MIG instance's lacks are its GPU model's
            model = model_of(gpu) or scope
            lacks.setdefault(model, {}).setdefault(what, set()).add(gpu)
        self._pending.clear()
        for model, whats in lacks.items():
            said = self._said.get(model)
            if said is None:
                if len(self._said) >= MAX_MODELS:
                    continue  # still at debug above
                said = self._said[model] = set()
            new = [what for what in whats if what not in said]
            if not new:
                continue
            said.update(new)
            count = max(gpus_of(model), *(len(whats[what]) for what in new))
            parts = [
                what if len(whats[what]) == count else f"{what} (on {len(whats[what])} of them)"
                for what in new
            ]
            gpus = f" ({count} GPUs)" if count > 1 else ""
            log.info("NVML: %s%s does not support %s; not asking again (each GPU at debug level)",
                     model, gpus, ", ".join(parts))  # fmt: skip
