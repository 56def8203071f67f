"""A policy's state on one GPU in one cycle, as the schemas see it.

Produced by :mod:`falcon_gpu.policies`; kept here so the schemas need not import it.
"""

from __future__ import annotations

from falcon_gpu.model.record import Record


class PolicyStatus(Record):
    policy: str
    gpu_uuid: str
    violating: bool
    violations_total: int
    """Times the policy fired on this GPU since the agent started."""
