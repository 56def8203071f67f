"""Health checks: turn raw error counters and events into pass/warn/fail per device."""

from falcon_gpu.health.evaluator import HealthEvaluator

__all__ = ["HealthEvaluator"]
