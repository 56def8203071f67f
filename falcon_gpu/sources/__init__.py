"""Sources: read hardware and return typed readings (no metric names, no wires).

Only NVML today (:mod:`falcon_gpu.sources.nvml`); a new hardware source gets its
own sub-package and returns model types from :mod:`falcon_gpu.model`.
"""
