"""Policies (CONTRACT section 8): DCGM's ``dcgmi policy`` without DCGM.

A policy is one violation condition on a GPU (temperature, power, ECC, XID,
retired pages, PCIe replays, row-remap failure, a failed health check) that
must hold ``for`` seconds before it fires. Evaluated on each cycle's snapshot
and health (:mod:`.engine`), exported as ``falcon_gpu_policy_violation`` and
``falcon_gpu_policy_violations_total``, and sent to Alertmanager and webhooks
(:mod:`.notify`).
"""

from falcon_gpu.model.policy import PolicyStatus
from falcon_gpu.policies.config import PolicyConfig
from falcon_gpu.policies.engine import Alert, PolicyEngine

__all__ = ["Alert", "PolicyConfig", "PolicyEngine", "PolicyStatus"]
