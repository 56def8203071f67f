"""Which NVLinks are up, and their data-link error counters: read with the slow readings.

**Links up.** ``nvmlDeviceGetNvLinkState`` per link (0 to NVML_NVLINK_MAX_LINKS - 1, 18 on Hopper and
later), once every :data:`~falcon_gpu.sources.nvml.slow.REFRESH_S` (:meth:`SlowReadings.kept`): a GPU
without NVLink answers NOT_SUPPORTED for link 0 (one call, remembered without a log line, never asked
again), a GPU with fewer links answers INVALID_ARGUMENT past its last one (the loop stops there). A GPU
with no active link has no NVLink readings at all (the interconnect reader publishes none: a T4 or an
L40S has no NVLink series, never a row of zeros). A binding without the function leaves the state
unknown and the NVLink readings to what the field values answer, as before.

**Error counters.** On Hopper and later the driver counts NVLink errors per link in the data-link
fields ``NVML_FI_DEV_NVLINK_ERROR_DL_CRC``, ``..._REPLAY`` and ``..._RECOVERY`` with the link as
``scopeId`` (what DCGM reads, and all NVIDIA's NVML mock serves): all 18 links, where the older
``..._ERROR_COUNT_L<n>`` fields name only links 0-11 and their ``_TOTAL`` may not be answered at all.
The DL fields of the active links (3 x 18 on an H100) are asked in one field-values call of their own,
with the slow readings (:meth:`SlowReadings.follows`): again as soon as the older error totals in the
cycle's batch moved (on drivers that answer them), every cycle while two answers in a row differ (errors
still rising), and at least once a minute; in between, the last answer is published again. The steady
cycle makes no NVML call for them. The DL CRC counter (``nvidia-smi nvlink -e`` on Hopper: "CRC
Errors") is published as the CRC flit count; the data CRC count has no DL field and stays with the older
fields. A kind whose DL field every active link answers NOT_SUPPORTED (a driver without them) falls back
to the older fields (:mod:`~falcon_gpu.sources.nvml.readers.interconnect`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import msgspec
import pynvml

from falcon_gpu.sources.nvml.calls import ABSENT, NvmlCaller
from falcon_gpu.sources.nvml.field_values import NVLINK_LINKS, FieldSpec
from falcon_gpu.sources.nvml.readers.base import DeviceContext

DL_KINDS: Final = (("crc_flit", "CRC"), ("replay", "REPLAY"), ("recovery", "RECOVERY"))
"""(the :class:`~falcon_gpu.model.snapshot.NvlinkErrors` kind, the DL field's name) per DL counter."""
DL_KIND_AT: Final = (0, 2, 3)
"""Each DL kind's position among the :class:`NvlinkErrors` kinds (crc_flit, crc_data, replay, recovery)."""
NVLINK_DL_ERRORS: Final = tuple(
    tuple(
        FieldSpec(f"nvlink_dl_l{link}_{kind}", getattr(pynvml, f"NVML_FI_DEV_NVLINK_ERROR_DL_{name}"),
                  scope_id=link, quiet=True)
        for link in range(NVLINK_LINKS)
    )
    for kind, name in DL_KINDS
)  # fmt: skip
"""Per DL kind (:data:`DL_KINDS` order), per link 0-17 (index = link): its data-link error counter."""

ALL_LINKS: Final = tuple(range(NVLINK_LINKS))
"""The links where the state is unknown (no ``nvmlDeviceGetNvLinkState`` in the binding)."""
_NO_NVLINK: Final = -1
_STATE_ANSWERS: Final = {
    pynvml.NVML_ERROR_INVALID_ARGUMENT: None,
    pynvml.NVML_ERROR_NOT_SUPPORTED: _NO_NVLINK,
}
"""INVALID_ARGUMENT for a link number is the answer "the GPU has no link with this number";
NOT_SUPPORTED, "the GPU has no NVLink" (remembered without a log line: nothing is missing)."""
_STATE: Final = "nvmlDeviceGetNvLinkState"

DlCounts = tuple[tuple[int | None, ...] | None, ...]
"""Per DL kind: each link's counter (index = link, None where not active or not answered), or None
where no active link answers the kind (the older fields count it, if any)."""


class DlErrors(msgspec.Struct, frozen=True, gc=False):
    """What one read of the data-link error counters found (kept until they are read again)."""

    kinds: DlCounts
    """Per DL kind, the links' counters (:data:`DlCounts`)."""
    counted: bool
    """Whether a link counted an error (the steady cycle of a healthy GPU looks at this alone)."""


NO_DL_ERRORS: Final = DlErrors((None, None, None), False)
"""No data-link counters (a GPU whose state is unknown and whose fields were not read)."""


def active_links(ctx: DeviceContext) -> tuple[int, ...]:
    """The GPU's links that are up (asked once a minute); () where it has no NVLink."""
    return ctx.slow.kept(  # type: ignore[no-any-return]
        ctx.nvml, ctx.timestamp, ctx.scope, "nvlink_state", _states, ctx.nvml, ctx.scope, ctx.handle
    )


def _states(nvml: NvmlCaller, scope: str, handle: Any) -> tuple[int, ...]:
    if getattr(nvml.lib, _STATE, None) is None:  # an old binding: the field values say what there is
        return ALL_LINKS
    up = []
    for link in range(NVLINK_LINKS):
        state = nvml.call(scope, "nvlink_state", _STATE, handle, link, answers=_STATE_ANSWERS)
        if state == _NO_NVLINK:
            nvml.mark_not_supported(scope, "nvlink_state", quiet=True)
            break
        if state is ABSENT or state is None:  # no such link (or an error, counted by the reader)
            break
        if state == pynvml.NVML_FEATURE_ENABLED:
            up.append(link)
    return tuple(up)


def _never(_: Any) -> bool:
    return False


def dl_errors(ctx: DeviceContext, links: tuple[int, ...], token: Sequence[Any]) -> DlErrors:
    """The DL error counters of ``links`` (the active ones), asked with the slow readings: again when
    ``token`` (the older error totals of this cycle's batch) differs from the one they were asked
    under, while they still move, and at least once a minute."""
    return ctx.slow.follows(  # type: ignore[no-any-return]
        ctx.nvml, ctx.timestamp, ctx.scope, "nvlink_dl", (links, tuple(token)), _never, _ask, ctx, links
    )


def _ask(ctx: DeviceContext, links: tuple[int, ...]) -> DlErrors:
    batch = ctx.field_values
    specs = tuple(kind[link] for kind in NVLINK_DL_ERRORS for link in links)
    numbers = batch.ask(specs) or [None] * len(specs)
    out: list[tuple[int | None, ...] | None] = []
    for k, kind in enumerate(NVLINK_DL_ERRORS):
        if not any(batch.supported(kind[link]) for link in links):
            out.append(None)
            continue
        counts: list[int | None] = [None] * NVLINK_LINKS
        for i, link in enumerate(links):
            value = numbers[k * len(links) + i]
            counts[link] = None if value is None else int(value)
        out.append(tuple(counts))
    return DlErrors(tuple(out), any(c and any(c) for c in out))
