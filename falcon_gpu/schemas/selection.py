"""Which families a schema emits: the ``[metrics]`` table's ``include`` / ``exclude`` globs.

Patterns are :func:`fnmatch.fnmatchcase` globs over family names (``falcon_gpu_*``,
``DCGM_FI_PROF_*``, Open-Falcon's ``GPUHealth``): case-sensitive, as the names are. No ``include``
means every family; ``exclude`` is applied after ``include``. The choice is made once per schema
table (:meth:`MetricSelection.chosen`, kept by the selection: one entry per schema), and the
builder then skips an excluded family before building a single ``Series`` of it: no conversion,
no encoding, nothing on the wire. So it costs nothing downstream of the schema's own loop.

:data:`ALWAYS_KEPT` are never dropped: ``falcon_gpu_agent_cycles_total`` is what the shipped
"agent down / stalled" alerts and the fleet dashboards count, ``falcon_gpu_agent_errors_total``
what says that the agent itself is failing; excluding them would blind every check on the agent.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase

ALWAYS_KEPT = frozenset({"falcon_gpu_agent_cycles_total", "falcon_gpu_agent_errors_total"})
"""Agent families an ``exclude`` (or a missing ``include``) never drops."""


class MetricSelection:
    """The ``[metrics]`` table, compiled: immutable patterns and, per schema table, the names kept.

    The per-table cache is bounded by the number of schemas (each table is one tuple for the life of
    the process); it is keyed by the table's value, so two equal tables share an entry."""

    __slots__ = ("_chosen", "exclude", "include")

    def __init__(self, include: Sequence[str] = (), exclude: Sequence[str] = ()) -> None:
        self.include: tuple[str, ...] = tuple(include)
        self.exclude: tuple[str, ...] = tuple(exclude)
        self._chosen: dict[tuple[str, ...], frozenset[str]] = {}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MetricSelection):
            return NotImplemented
        return (self.include, self.exclude) == (other.include, other.exclude)

    def __hash__(self) -> int:
        return hash((self.include, self.exclude))

    def __repr__(self) -> str:
        return f"MetricSelection(include={self.include!r}, exclude={self.exclude!r})"

    @property
    def everything(self) -> bool:
        """No pattern at all: every family, and the schemas need not look."""
        return not self.include and not self.exclude

    def allows(self, name: str) -> bool:
        """Whether the family ``name`` is emitted (uncached: for a table use :meth:`chosen`)."""
        if name in ALWAYS_KEPT:
            return True
        if self.include and not any(fnmatchcase(name, p) for p in self.include):
            return False
        return not any(fnmatchcase(name, p) for p in self.exclude)

    def chosen(self, names: tuple[str, ...]) -> frozenset[str] | None:
        """The names of ``names`` (one schema's table) that are emitted; None: all of them."""
        if self.everything:
            return None
        found = self._chosen.get(names)
        if found is None:
            if len(self._chosen) >= 16:  # tables are per schema; a test building many stays bounded
                self._chosen.clear()
            found = self._chosen[names] = frozenset(filter(self.allows, names))
        return found

    def unmatched(self, names: Iterable[str]) -> list[str]:
        """A warning for each pattern that matches none of ``names`` (the families of the schemas in
        use), naming the nearest family: a misspelt pattern silently selecting nothing is the trap."""
        import difflib  # at start, and only with patterns: not on the plugin's every run

        known = sorted(set(names))
        problems = []
        for key, patterns in (("include", self.include), ("exclude", self.exclude)):
            for pattern in patterns:
                if any(fnmatchcase(name, pattern) for name in known):
                    continue
                bare = pattern.replace("*", "").replace("?", "")
                near = difflib.get_close_matches(bare, known, n=1, cutoff=0)
                hint = f"; the nearest family is {near[0]!r}" if near else ""
                problems.append(f"metrics.{key}: {pattern!r} matches no family of the schemas in use{hint}")
        return problems


EVERYTHING = MetricSelection()
"""No ``[metrics]`` patterns (immutable: its cache is never written, :meth:`chosen` returns None)."""
