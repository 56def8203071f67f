"""Right-sizing advice: which workloads hold a whole GPU for a slice's worth of work.

:mod:`.workload` names what survives a restart (a pod's controller, else its name without the
generated suffix); :mod:`.quantile` keeps a job's p95 in bounded memory; :mod:`.profiles` is a
GPU model's MIG profiles as NVML describes them; :mod:`.placement` picks the smallest placement
that holds a workload with headroom; :mod:`.summary` folds job records into per-workload
figures; ``falcon-gpu advise`` is :mod:`falcon_gpu.agent.advise`. Nothing here runs on the agent's hot path
except :mod:`.workload` and :mod:`.quantile` (constant work per job and cycle).
"""
