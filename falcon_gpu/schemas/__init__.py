"""Schemas: the only place that knows metric names.

Each schema is a pure function of :class:`~falcon_gpu.model.cycle.CycleData`:
``falcon_gpu``, ``dcgm`` and ``nvidia_smi`` produce Prometheus families, ``openfalcon`` produces
Open-Falcon items. Add a metric by adding its spec and one ``add`` call in the
schema module that owns its level (device, pod, agent).
"""
