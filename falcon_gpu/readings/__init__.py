"""Readings declared once: each scalar device reading's field, unit, NVML source, scenario key and
per-schema name (:mod:`~falcon_gpu.readings.device`), and the one place units convert
(:mod:`~falcon_gpu.readings.units`). See docs/ARCHITECTURE.md, "Recipe: add a reading"."""
