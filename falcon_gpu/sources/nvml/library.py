"""Which NVML library the source talks to: the real ``pynvml`` module or the simulator.

Both offer the same ``nvml*`` functions and constants, and both raise
``pynvml.NVMLError``; the source only ever reaches them through
:class:`~falcon_gpu.sources.nvml.calls.NvmlCaller`, so nothing else needs to know which.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from falcon_gpu.simulator.scenario.parse import Scenario

NvmlLibrary: TypeAlias = Any
"""The ``pynvml`` module or a ``SimulatedNvml``: used only through ``getattr`` by name,
so that a function missing from an old pynvml is an answer ("not available"), not a crash."""


def load_nvml(scenario: Scenario | None) -> NvmlLibrary:
    """``None``: the real ``pynvml`` module (importing it loads no driver yet: that
    happens in ``nvmlInit``); a scenario: a fresh ``SimulatedNvml`` for it."""
    if scenario is None:
        import pynvml

        return pynvml
    from falcon_gpu.simulator.nvml.library import SimulatedNvml

    return SimulatedNvml(scenario)
