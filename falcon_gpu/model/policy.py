"""A policy's state on one GPU in one cycle, as the schemas see it.

Produced by :mod:`falcon_gpu.policies`; kept here so the schemas need not import it.
"""

from __future__ import annotations

import msgspec


class PolicyStatus(msgspec.Struct, frozen=True, gc=False):
    policy: str
    gpu_uuid: str
    violating: bool
    violations_total: int
    """Times the policy fired on this GPU since the agent started."""
