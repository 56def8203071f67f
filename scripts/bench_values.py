#!/usr/bin/env python3
"""How value classes are declared, measured: a hand-written slotted ``__init__``, the old ``Record``
metaclass (kept here as it was, to compare), ``msgspec.Struct(frozen=True, gc=False)`` and a frozen
slotted ``@dataclass``.

Rows, each the median of ``--repeats`` timings:

- *define 67 classes*: executing the already-compiled bodies of 67 six-field classes (what an import
  costs once the ``.pyc`` exists; a ``@dataclass`` compiles its methods here as well);
- *construct* a 2-field value (``Series``) and a 7-field one (``FalconItem``), by position and by
  keyword; *attribute read*; ``==`` and ``hash`` of equal values; *replace* one field;
- *import msgspec*: ``python -c 'import msgspec'`` against ``python -c pass``, in fresh processes.

Usage: python scripts/bench_values.py [--repeats 7] [--number 200000]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import subprocess
import sys
import time
import timeit
from operator import attrgetter
from typing import Any

import msgspec


class _RecordMeta(type):
    """The ``Record`` metaclass as ``falcon_gpu/model/record.py`` had it (its measured core)."""

    def __new__(mcs, name: str, bases: tuple[type, ...], ns: dict[str, Any]) -> _RecordMeta:
        if "__slots__" not in ns:
            fields = tuple(ns.get("__annotations__", {}))
            defaults = {f: ns.pop(f) for f in fields if f in ns}
            ns["__slots__"] = ns["_fields"] = fields
            ns["_defaults"] = defaults
        fields = ns.get("_fields", ())
        ns["_values"] = staticmethod(attrgetter(*fields) if len(fields) > 1 else lambda r: ())
        return super().__new__(mcs, name, bases, ns)


class Record(metaclass=_RecordMeta):
    __slots__ = ("_hash",)
    _fields: tuple[str, ...]
    _defaults: dict[str, Any] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        fields = self._fields
        for name, value in zip(fields, args, strict=False):
            setattr(self, name, value)
        if len(args) < len(fields):
            for name in fields[len(args) :]:
                setattr(self, name, kwargs.pop(name) if name in kwargs else self._defaults[name])

    def _replace(self, **changes: Any) -> Any:
        values = {name: getattr(self, name) for name in self._fields}
        values.update(changes)
        return type(self)(**values)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        values = type(self)._values  # type: ignore[attr-defined]
        return self is other or bool(values(self) == values(other))

    def __hash__(self) -> int:
        hashed: int | None = getattr(self, "_hash", None)
        if hashed is None:
            hashed = hash((type(self), type(self)._values(self)))  # type: ignore[attr-defined]
            object.__setattr__(self, "_hash", hashed)
        return hashed


FIELDS7 = ("endpoint", "metric", "timestamp", "step", "value", "counter_type", "tags")
ARGS7 = ("node", "gpu.util", 1700000000, 60, 42.0, "GAUGE", "gpu=0")
KW7 = dict(zip(FIELDS7, ARGS7, strict=True))


def _hand(name: str, fields: tuple[str, ...]) -> str:
    params = ", ".join(fields)
    body = "".join(f"        self.{f} = {f}\n" for f in fields)
    return (
        f"class {name}(Record):\n    __slots__ = _fields = {fields!r}\n"
        f"    def __init__(self, {params}):\n{body}"
    )


def _annotated(name: str, fields: tuple[str, ...], head: str) -> str:
    return (
        f"{head}class {name}({'Record' if not head else 'msgspec.Struct, frozen=True, gc=False'}):\n"
        + "".join(f"    {f}: object\n" for f in fields)
    )


STYLES: dict[str, Any] = {
    "hand-written __slots__ + __init__": lambda n, f: _hand(n, f),
    "Record metaclass": lambda n, f: _annotated(n, f, ""),
    "msgspec.Struct(frozen=True, gc=False)": lambda n, f: _annotated(n, f, "\n"),
    "@dataclass(frozen=True, slots=True)": lambda n, f: (
        "@dataclasses.dataclass(frozen=True, slots=True)\nclass "
        + n
        + ":\n"
        + "".join(f"    {x}: object\n" for x in f)
    ),
}


def _define(style: str, names: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    source = "\n".join(STYLES[style](n, f) for n, f in names.items())
    code = compile(source, f"<{style}>", "exec")  # compiled once, outside the timing, as a .pyc is
    scope: dict[str, Any] = {"Record": Record, "msgspec": msgspec, "dataclasses": dataclasses}
    exec(code, scope)
    return {"code": code, "scope": scope}


def _median(stmt: Any, number: int, repeats: int) -> float:
    return statistics.median(timeit.repeat(stmt, number=number, repeat=repeats)) / number * 1e9


def _define_ms(code: Any, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        scope = {"Record": Record, "msgspec": msgspec, "dataclasses": dataclasses}
        t0 = time.perf_counter()
        exec(code, scope)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def _import_ms(repeats: int) -> tuple[float, float]:
    def run(stmt: str) -> float:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", stmt], check=True)
        return time.perf_counter() - t0

    bare, with_msgspec = [], []
    for _ in range(repeats):  # alternating, so a busy machine slows both alike
        bare.append(run("pass"))
        with_msgspec.append(run("import msgspec"))
    return statistics.median(bare) * 1000, statistics.median(with_msgspec) * 1000


def _per_value(style: str, n: int, r: int) -> list[float]:
    """Construct, read, compare, hash and replace, in ns each."""
    scope = _define(style, {"Series": ("labels", "value"), "Item": FIELDS7})["scope"]
    series, item = scope["Series"], scope["Item"]
    labels = (("gpu", "0"), ("uuid", "GPU-1"))
    one, two, hashable = item(*ARGS7), item(*ARGS7), series(labels, 1.0)
    if style.startswith("msgspec"):
        replace: Any = lambda: msgspec.structs.replace(one, value=1.0)  # noqa: E731
    elif style.startswith("@dataclass"):
        replace = lambda: dataclasses.replace(one, value=1.0)  # noqa: E731
    else:
        replace = lambda: Record._replace(one, value=1.0)  # noqa: E731
    get = attrgetter("value")
    return [
        _median(lambda: series(labels, 1.0), n, r),
        _median(lambda: item(*ARGS7), n, r),
        _median(lambda: item(**KW7), n, r),
        _median(lambda: get(one), n, r),
        _median(lambda: one == two, n, r),
        _median(lambda: hash(hashable), n, r),
        _median(replace, n // 4, r),
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--number", type=int, default=200_000)
    args = ap.parse_args()
    n, r = args.number, args.repeats
    many = {f"V{i}": tuple(f"f{j}" for j in range(6)) for i in range(67)}
    print(
        "| style | define 67 classes, ms | new 2 fields, ns | new 7 by position, ns | new 7 by keyword, ns "
        "| attribute read, ns | == , ns | hash, ns | replace 1 of 7, ns |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for style in STYLES:
        row = [_define_ms(_define(style, many)["code"], r), *_per_value(style, n, r)]
        print(f"| {style} | " + " | ".join(f"{x:.{3 if i == 0 else 0}f}" for i, x in enumerate(row)) + " |")
    bare, imported = _import_ms(r * 3)
    print(
        f"\nimport msgspec: {imported:.1f} ms process against {bare:.1f} ms for `python -c pass` "
        f"(+{imported - bare:.1f} ms)"
    )


if __name__ == "__main__":
    main()
