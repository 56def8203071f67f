"""What an XID code means, for ``DCGM_FI_DEV_XID_ERRORS{err_msg}`` and alert texts.

The texts are the one-line descriptions of NVIDIA's XID catalogue
(https://docs.nvidia.com/deploy/xid-errors/, "Xid Error Listing" and the Ampere+
catalogue) for the XIDs a datacenter fleet actually sees. dcgm-exporter labels
the same metric with ``err_code`` and ``err_msg``, so alert rules written against
it (``err_msg`` in the annotation, ``err_code=~"48|79|…"`` in the selector) work
here unchanged. A code not listed reads ``Unknown Error``, as there; ``0`` is
"no XID since the agent started".
"""

from __future__ import annotations

NO_ERROR = "No Error"
UNKNOWN = "Unknown Error"

XID_MESSAGES: dict[int, str] = {
    0: NO_ERROR,
    8: "GPU stopped processing",
    13: "Graphics Engine Exception",
    31: "GPU memory page fault",
    32: "Invalid or corrupted push buffer stream",
    38: "Driver firmware error",
    43: "GPU stopped processing",
    44: "Graphics Engine fault during context switch",
    45: "Preemptive cleanup, due to previous errors",
    48: "Double Bit ECC Error",
    54: "Auxiliary power is not connected to the GPU board",
    61: "Internal micro-controller breakpoint/warning",
    62: "Internal micro-controller halt",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    68: "NVDEC0 Exception",
    69: "Graphics Engine class error",
    74: "NVLINK Error",
    79: "GPU has fallen off the bus",
    92: "High single-bit ECC error rate",
    94: "Contained ECC error",
    95: "Uncontained ECC error",
    119: "GSP RPC Timeout",
    120: "GSP Error",
    121: "C2C Link corrected error",
    140: "Unrecovered ECC Error",
    154: "GPU Recovery Action Changed",
}


def xid_message(code: int) -> str:
    """NVIDIA's description of ``code``; :data:`UNKNOWN` for a code not in the table."""
    return XID_MESSAGES.get(code, UNKNOWN)
