"""What the readers keep from one cycle to the next, typed, owned by the source whose work it is.

Each :class:`~falcon_gpu.sources.nvml.source.NvmlSource` makes one :class:`ReaderState` and hands it to
its readers as ``ctx.state``: two sources in one process (tests, a command beside the agent) share
nothing. A piece of state kept per scope (a GPU's UUID, or a MIG instance's) is dropped when the source
forgets the GPU (:meth:`ReaderState.forget`: it stopped answering; :meth:`ReaderState.forget_scopes`:
the devices were looked up again) and an instance's when a new layout no longer lists it
(:meth:`ReaderState.note_instances`), so what is kept is bounded by the GPUs and instances there are.

A plain slotted class: its attributes are read on the hot path (every GPU, every cycle), where a slot
is one C-level load; nothing compares, hashes or encodes it, which is what a ``msgspec.Struct`` would
add.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from falcon_gpu.model.snapshot import ProcessReading
    from falcon_gpu.sources.nvml.calls import Variant
    from falcon_gpu.sources.nvml.readers.base import Fields
    from falcon_gpu.sources.nvml.readers.processes import ProcessKey, _Steady


class ReaderState:
    """The readers' kept state of one source; see the module docstring."""

    __slots__ = (
        "clock_reasons", "graphics_levels", "health", "instances", "kept_processes", "memory_variants",
        "mps_gates", "process_lists",
    )  # fmt: skip

    def __init__(self) -> None:
        self.memory_variants: tuple[Variant, ...] | None = None
        """The memory-info generations to try, v2 (where the binding has ``nvmlMemory_v2``) then v1.
        Written once by the memory reader (``readers/memory.py`` ``_variants``), from the library's
        constants; one value per source."""
        self.clock_reasons: dict[int, frozenset[str]] = {}
        """Clock-event mask -> the reasons' names it sets. Written by the clocks reader
        (``readers/clocks.py`` ``_reasons``); at most its ``_MASKS_KEPT`` masks (a mask is a bit set)."""
        self.health: dict[str, tuple[tuple[Any, ...], Fields]] = {}
        """Per GPU scope: its last health field values and the fields made of them, handed out again
        (copied) while the values stay the same. Written by the health reader (``readers/health.py``);
        one entry per GPU."""
        self.mps_gates: dict[str, tuple[list[int], bool, frozenset[int]]] = {}
        """Per GPU or MIG instance scope: its last compute list's PIDs, whether they may hold the MPS
        server, and those PIDs as a set. Written by ``readers/processes.py`` ``_compute_pids``; one entry
        per scope."""
        self.graphics_levels: dict[str, int] = {}
        """Per GPU or MIG instance scope: the memory it used beyond its compute and MPS processes when
        its graphics list was last asked for a reason of its own. Written by ``readers/processes.py``
        ``_graphics_may_run``; one entry per scope."""
        self.process_lists: dict[str, _Steady] = {}
        """Per GPU or MIG instance scope: its last full pass over the process lists (what the readings
        were built from, and the readings). Written by ``readers/processes.py`` ``list_processes``; one
        entry per scope."""
        self.kept_processes: dict[str, dict[ProcessKey, ProcessReading]] = {}
        """Per GPU or MIG instance scope: last cycle's process readings by (PID, GPU instance, compute
        instance), re-used where nothing in them moved. Written by ``readers/processes.py``
        ``_readings``; one entry per scope, each at most its ``MAX_KEPT`` processes."""
        self.instances: dict[str, tuple[str, ...]] = {}
        """Per GPU scope: the scopes of its MIG instances in the layout last read (what
        :meth:`forget` drops with the GPU). Written by the MIG reader (``readers/mig.py``
        ``_enumerate``) through :meth:`note_instances`; one entry per MIG-enabled GPU."""

    def _drop(self, scope: str) -> None:
        """Drop what is kept for ``scope`` alone."""
        self.health.pop(scope, None)
        self.mps_gates.pop(scope, None)
        self.graphics_levels.pop(scope, None)
        self.process_lists.pop(scope, None)
        self.kept_processes.pop(scope, None)

    def forget(self, scope: str) -> None:
        """Drop what is kept for GPU ``scope`` and its MIG instances (the GPU stopped answering)."""
        for instance in self.instances.pop(scope, ()):
            self._drop(instance)
        self._drop(scope)

    def forget_scopes(self) -> None:
        """Drop everything kept per scope (the devices were looked up again, NVML went, the source
        closed); what is kept per source (the memory variants, the masks' reasons) stays."""
        self.health.clear()
        self.mps_gates.clear()
        self.graphics_levels.clear()
        self.process_lists.clear()
        self.kept_processes.clear()
        self.instances.clear()

    def note_instances(self, scope: str, instances: tuple[str, ...]) -> None:
        """GPU ``scope``'s MIG layout was read: these are its instances' scopes now; an instance the
        last layout listed and this one does not was destroyed, and what was kept for it goes."""
        for gone in set(self.instances.get(scope, ())).difference(instances):
            self._drop(gone)
        if instances:
            self.instances[scope] = instances
        else:
            self.instances.pop(scope, None)
