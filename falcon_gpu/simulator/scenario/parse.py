"""Simulator scenarios (CONTRACT section 5): typed, strictly parsed, resolvable by name.

A scenario describes what a fake NVML library answers, cycle by cycle, and
optionally the host around it (:class:`~falcon_gpu.simulator.scenario.host_model.HostScenario`).
A number may be a list: one value per cycle from cycle 0, the last repeating
(:func:`at`). Parsing is strict so that a typo in a test fixture fails loudly:
:class:`ScenarioError` messages start with the JSON path, e.g.
``gpus[0].ecc.bogus: unknown key``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from falcon_gpu.model.snapshot import CLOCK_EVENT_REASONS
from falcon_gpu.readings.device import READINGS
from falcon_gpu.simulator.scenario.model import (
    GPM_KEYS,
    PROCESS_TYPES,
    EccScenario,
    FabricScenario,
    Gpm,
    GpuScenario,
    MigScenario,
    NvlinkScenario,
    ProcessScenario,
    RemappedRowsScenario,
    RetiredPagesScenario,
    Scenario,
    Series,
    XidEvent,
    at,
)
from falcon_gpu.simulator.scenario.strict_json import Obj, ScenarioError

if TYPE_CHECKING:
    from falcon_gpu.simulator.scenario.host_model import HostScenario

__all__ = [
    "EccScenario",
    "GpuScenario",
    "MigScenario",
    "ProcessScenario",
    "RemappedRowsScenario",
    "RetiredPagesScenario",
    "Scenario",
    "ScenarioError",
    "Series",
    "XidEvent",
    "at",
    "bundled_names",
    "load_scenario",
    "parse_scenario",
    "resolve_scenario",
]

NUMERIC_KEYS = tuple(r.sim.key for r in READINGS if r.sim is not None and r.sim.group is None)
"""A GPU's plain numbers (``power_watts``, ``sm_clock_mhz``, ...): the reading table's scenario keys."""
PCIE_KEYS = tuple(r.sim.key for r in READINGS if r.sim is not None and r.sim.group == "pcie")
NOT_SUPPORTED_NAMES = frozenset(NUMERIC_KEYS) | {
    "ecc", "retired_pages", "remapped_rows", "clock_event_reasons", "inforom", "mig", "processes",
    "process_utilization", "xid_events", "gpm", "pcie", "nvlink", "nvlink_dl_errors", "nvlink_error_counts",
    "fabric",
}  # fmt: skip
"""Names accepted in ``not_supported``: every numeric key, plus readings without a key of their own
(``nvlink_dl_errors``: the per-link ``NVML_FI_DEV_NVLINK_ERROR_DL_*`` fields, as on a driver that lacks
them; ``nvlink_error_counts``: the older ``..._ERROR_COUNT_TOTAL`` / ``_L0``-``_L11`` ones, as on
NVIDIA's NVML mock and Hopper-era drivers that answer them NOT_SUPPORTED)."""


def _cycles(o: Obj) -> tuple[int, int | None]:
    """``from_cycle`` (default 0) and ``until_cycle`` (default None: to the end) of a process or
    MIG instance; present from the first up to, not including, the second."""
    first, until = o.integer("from_cycle", 0), o.opt_integer("until_cycle")
    if first < 0:
        raise ScenarioError(f"{o.sub('from_cycle')}: expected a cycle number (0 or more), got {first}")
    if until is not None and until <= first:
        raise ScenarioError(
            f"{o.sub('until_cycle')}: expected a cycle after from_cycle ({first}), got {until}"
        )
    return first, until


def _process(o: Obj) -> ProcessScenario:
    raw_type = o.raw("type")
    types: tuple[str, ...]
    if raw_type is None:
        types = ("compute",)
    elif isinstance(raw_type, str):
        types = (raw_type,)
    elif isinstance(raw_type, list) and raw_type and all(isinstance(t, str) for t in raw_type):
        types = tuple(raw_type)
    else:
        raise ScenarioError(f"{o.sub('type')}: expected one of {PROCESS_TYPES} or a list of them")
    for t in types:
        if t not in PROCESS_TYPES:
            raise ScenarioError(f"{o.sub('type')}: expected one of {PROCESS_TYPES}, got {t!r}")
    first, until = _cycles(o)
    proc = ProcessScenario(
        pid=o.integer("pid"),
        name=o.opt_string("name"),
        types=types,
        used_memory_bytes=o.series("used_memory_bytes"),
        sm_util_percent=o.series("sm_util_percent"),
        from_cycle=first,
        until_cycle=until,
    )
    o.done()
    return proc


def _keyed(o: Obj | None, keys: tuple[str, ...]) -> dict[str, Series] | None:
    """An object of the given series keys (None when absent); an unknown key fails naming its path."""
    if o is None:
        return None
    found = {k: v for k in keys if (v := o.series(k)) is not None}
    o.done()
    return found


def _gpm(o: Obj) -> Gpm | None:
    return _keyed(o.obj("gpm"), GPM_KEYS)


NVLINK_KEYS = (
    "tx_bytes",
    "rx_bytes",
    "crc_flit_errors",
    "crc_data_errors",
    "replay_errors",
    "recovery_errors",
)


def _nvlink(o: Obj) -> NvlinkScenario:
    link = NvlinkScenario(o.integer("link"), *(o.series(k) for k in (*NVLINK_KEYS, "active")))
    if link.active is not None and any(v not in (0.0, 1.0) for v in link.active):
        raise ScenarioError(f"{o.sub('active')}: expected 1 (link up) or 0 (down) per cycle")
    o.done()
    return link


def _mig(o: Obj) -> MigScenario:
    first, until = _cycles(o)
    mig = MigScenario(
        gpu_instance_id=o.integer("gpu_instance_id"),
        compute_instance_id=o.integer("compute_instance_id", 0),
        profile=o.string("profile"),
        uuid=o.string("uuid"),
        memory_total_bytes=o.series("memory_total_bytes"),
        memory_used_bytes=o.series("memory_used_bytes"),
        processes=tuple(_process(p) for p in o.objects("processes")),
        gpm=_gpm(o),
        placement_start=o.opt_integer("placement_start"),
        from_cycle=first,
        until_cycle=until,
    )
    o.done()
    return mig


def _mig_mode(o: Obj) -> Series | None:
    mode = o.series("mig_mode")
    if mode is not None and any(v not in (0.0, 1.0) for v in mode):
        raise ScenarioError(f"{o.sub('mig_mode')}: expected 1 (MIG on) or 0 (off) per cycle")
    return mode


def _ecc(o: Obj) -> EccScenario:
    ecc = EccScenario(*(o.series(k) for k in EccScenario.__struct_fields__))
    o.done()
    return ecc


def _required_series(o: Obj, key: str) -> Series:
    value = o.series(key)
    return value if value is not None else (0.0,)


def _gpu(o: Obj, index: int) -> GpuScenario:
    values = {k: s for k in NUMERIC_KEYS if (s := o.series(k)) is not None}
    ecc = _ecc(e) if (e := o.obj("ecc")) else None
    retired = None
    if r := o.obj("retired_pages"):
        retired = RetiredPagesScenario(
            _required_series(r, "single_bit"), _required_series(r, "double_bit"), r.boolean("pending", False)
        )
        r.done()
    remapped = None
    if r := o.obj("remapped_rows"):
        remapped = RemappedRowsScenario(
            _required_series(r, "correctable"),
            _required_series(r, "uncorrectable"),
            r.boolean("pending", False),
            r.boolean("failed", False),
        )
        r.done()
    reasons = None
    if o.has("clock_event_reasons"):
        reasons = o.strings("clock_event_reasons")
        for i, name in enumerate(reasons):
            if name not in CLOCK_EVENT_REASONS:
                raise ScenarioError(
                    f"{o.sub('clock_event_reasons')}[{i}]: unknown reason {name!r}; "
                    f"expected one of {', '.join(CLOCK_EVENT_REASONS)}"
                )
    else:
        o.raw("clock_event_reasons")
    not_supported = o.strings("not_supported")
    for i, name in enumerate(not_supported):
        if name not in NOT_SUPPORTED_NAMES:
            raise ScenarioError(f"{o.sub('not_supported')}[{i}]: unknown reading {name!r}")
    xids = []
    for x in o.objects("xid_events"):
        xids.append(XidEvent(cycle=x.integer("cycle", 0), xid=x.integer("xid")))
        x.done()
    gpu = GpuScenario(
        uuid=o.string("uuid"),
        name=o.string("name"),
        pci_bus_id=o.string("pci_bus_id", f"00000000:{index + 1:02X}:00.0"),
        values=values,
        ecc=ecc,
        retired_pages=retired,
        remapped_rows=remapped,
        clock_event_reasons=reasons,
        inforom_valid=o.boolean("inforom_valid", True),
        not_supported=frozenset(not_supported),
        lost_at_cycle=o.opt_integer("lost_at_cycle"),
        xid_events=tuple(xids),
        processes=tuple(_process(p) for p in o.objects("processes")),
        mig=tuple(_mig(m) for m in o.objects("mig")),
        gpm=_gpm(o),
        pcie=_keyed(o.obj("pcie"), PCIE_KEYS),
        nvlink=tuple(_nvlink(n) for n in o.objects("nvlink")),
        mig_mode=_mig_mode(o),
        fabric=_fabric(o),
    )
    o.done()
    return gpu


def _fabric(o: Obj) -> FabricScenario | None:
    f = o.obj("fabric")
    if f is None:
        return None
    from falcon_gpu.simulator.scenario.parse_fabric import parse_fabric  # only scenarios with a fabric

    return parse_fabric(f)


def _host(obj: Obj, gpus: tuple[GpuScenario, ...]) -> HostScenario:
    from falcon_gpu.simulator.scenario.parse_host import parse_host  # only scenarios with a host

    return parse_host(obj, gpus)


def parse_scenario(data: Any) -> Scenario:
    """Build a :class:`Scenario` from parsed JSON. Raises ScenarioError naming the path."""
    top = Obj(data, "")
    gpus = tuple(_gpu(g, i) for i, g in enumerate(top.objects("gpus")))
    host_obj = top.obj("host")
    scenario = Scenario(
        driver_version=top.string("driver_version", "550.54.15"),
        cuda_version=top.string("cuda_version", "12.4"),
        gpus=gpus,
        host=_host(host_obj, gpus) if host_obj is not None else None,
    )
    top.done()
    uuids = [g.uuid for g in gpus] + [m.uuid for g in gpus for m in g.mig]
    for i, uuid in enumerate(uuids):
        if uuid in uuids[:i]:
            raise ScenarioError(f"gpus: uuid {uuid!r} appears twice; every GPU and MIG uuid must be unique")
    return scenario


def load_scenario(path: Path) -> Scenario:
    """Read and parse a scenario file.

    Raises ScenarioError when the file cannot be read, is not JSON (with line and
    column), or has an unknown key or a wrongly typed value (with its JSON path).
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read the scenario file: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ScenarioError(
            f"{path}: not UTF-8 text (byte {exc.start}); scenario files are UTF-8 JSON"
        ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ScenarioError(
            f"{path}: not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    except RecursionError:  # the decoder recurses once per level: 100,000 '[' exhaust the stack
        raise ScenarioError(f"{path}: nested too deeply to be a scenario (arrays or objects)") from None
    except ValueError as exc:  # an integer of more digits than Python converts (4300)
        raise ScenarioError(f"{path}: not a usable JSON document: {exc}") from None
    return parse_scenario(data)


def bundled_names() -> tuple[str, ...]:
    """Names accepted by :func:`resolve_scenario` besides paths (``mig-node``, ...)."""
    from importlib import resources

    folder = resources.files("falcon_gpu.simulator").joinpath("scenarios")
    return tuple(sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".json")))


DEFAULT_SCENARIO = "mixed-4gpu"


def resolve_scenario(arg: str | None) -> Path:
    """Where the scenario named by ``--simulate`` lives.

    None, "" or "default": the embedded mixed 4-GPU node; a bundled name such as
    ``mig-node``: the package's copy; anything else: a filesystem path.
    Raises ScenarioError when no such scenario exists (listing the bundled names).
    """
    if not arg or arg == "default":
        arg = DEFAULT_SCENARIO
    if "/" not in arg:  # a path skips importlib.resources (a few ms of every plugin start)
        from importlib import resources

        bundled = resources.files("falcon_gpu.simulator").joinpath("scenarios").joinpath(f"{arg}.json")
        if bundled.is_file():
            return Path(str(bundled))
    path = Path(arg)
    if path.is_file():
        return path
    raise ScenarioError(
        f"{arg}: no such scenario file; give a path to a JSON file or one of: default, "
        + ", ".join(bundled_names())
    )
