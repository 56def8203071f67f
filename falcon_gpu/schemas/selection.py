"""Which families a schema emits: the ``[metrics]`` table's ``profile`` and ``include`` / ``exclude`` globs.

Patterns are :func:`fnmatch.fnmatchcase` globs over family names (``falcon_gpu_*``,
``DCGM_FI_PROF_*``, Open-Falcon's ``GPUHealth``): case-sensitive, as the names are. No ``include``
means every family; ``exclude`` is applied after ``include``. The choice is made once per schema
table (:meth:`MetricSelection.chosen`, kept by the selection: one entry per schema), and the
builder then skips an excluded family before building a single ``Series`` of it: no conversion,
no encoding, nothing on the wire. So it costs nothing downstream of the schema's own loop.

``profile`` (:mod:`falcon_gpu.schemas.profiles`): ``full`` is every family, and ``include`` (when
given) keeps only what it names; ``default`` is a schema's lean set (``chosen``'s ``lean``), and
``include`` adds to it. A schema with no lean set follows ``full``'s rules in either profile.

:data:`ALWAYS_KEPT` are never dropped: ``falcon_gpu_agent_cycles_total`` is what the shipped
"agent down / stalled" alerts and the fleet dashboards count, ``falcon_gpu_agent_errors_total``
what says that the agent itself is failing; excluding them would blind every check on the agent.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase

from falcon_gpu.schemas.profiles import Profile

ALWAYS_KEPT = frozenset({"falcon_gpu_agent_cycles_total", "falcon_gpu_agent_errors_total"})
"""Agent families an ``exclude`` (or a missing ``include``) never drops."""


class MetricSelection:
    """The ``[metrics]`` table, compiled: immutable patterns and, per schema table, the names kept.

    The per-table cache is bounded by the number of schemas (each table is one tuple for the life of
    the process); it is keyed by the table's value, so two equal tables share an entry."""

    __slots__ = ("_chosen", "exclude", "include", "profile")

    def __init__(
        self, include: Sequence[str] = (), exclude: Sequence[str] = (), profile: Profile = "full"
    ) -> None:
        self.include: tuple[str, ...] = tuple(include)
        self.exclude: tuple[str, ...] = tuple(exclude)
        self.profile: Profile = profile
        self._chosen: dict[tuple[tuple[str, ...], frozenset[str] | None], frozenset[str] | None] = {}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MetricSelection):
            return NotImplemented
        return (self.include, self.exclude, self.profile) == (other.include, other.exclude, other.profile)

    def __hash__(self) -> int:
        return hash((self.include, self.exclude, self.profile))

    def __repr__(self) -> str:
        patterns = f"include={self.include!r}, exclude={self.exclude!r}"
        return f"MetricSelection({patterns}, profile={self.profile!r})"

    @property
    def sparse(self) -> bool:
        """The default profile: the families of :data:`~falcon_gpu.schemas.profiles.SPARSE` have a
        series only while it is not 0, with ``falcon_gpu_health_worst`` beside the health checks."""
        return self.profile == "default"

    @property
    def everything(self) -> bool:
        """No pattern at all (under ``full``, or in a schema with no lean set: every family, and the
        schemas need not look)."""
        return not self.include and not self.exclude

    def allows(self, name: str) -> bool:
        """Whether the family ``name`` is emitted by ``full``'s rules (uncached: for a table use
        :meth:`chosen`, which also knows a schema's lean set)."""
        if name in ALWAYS_KEPT:
            return True
        if self.include and not any(fnmatchcase(name, p) for p in self.include):
            return False
        return not any(fnmatchcase(name, p) for p in self.exclude)

    def chosen(self, names: tuple[str, ...], lean: frozenset[str] | None = None) -> frozenset[str] | None:
        """The names of ``names`` (one schema's table) that are emitted; None: all of them.

        ``lean``: the schema's default-profile families; None: the schema has none, ``full``'s rules
        apply. Kept per (table, lean set): one entry per schema in an agent."""
        lean = lean if self.profile == "default" else None
        if lean is None and self.everything:
            return None
        key = (names, lean)
        if key in self._chosen:
            return self._chosen[key]
        if len(self._chosen) >= 16:  # tables are per schema; a test building many stays bounded
            self._chosen.clear()
        if lean is None:
            found = frozenset(filter(self.allows, names))
        else:
            found = frozenset(
                name
                for name in names
                if name in ALWAYS_KEPT
                or (
                    (name in lean or any(fnmatchcase(name, p) for p in self.include))
                    and not any(fnmatchcase(name, p) for p in self.exclude)
                )
            )
        self._chosen[key] = found
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
"""The full profile and no ``[metrics]`` patterns (immutable: its cache is never written,
:meth:`chosen` returns None): what a schema renders when it is given no selection."""
