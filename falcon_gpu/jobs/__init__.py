"""Per-pod job records (DCGM's ``dcgmi stats``, per container and GPU, without DCGM).

A *job* is one container on one GPU (or MIG instance) while it has processes
there. :mod:`.tracker` follows the open jobs cycle by cycle and closes one when
its processes leave the GPU; :mod:`falcon_gpu.model.jobs` is the closed job (a
value the cycle carries); :mod:`.records_file` appends records to rotated
JSON-lines files under ``jobs_dir``; :mod:`.state` saves the open jobs so that a
job spanning an agent restart is one record; :mod:`.stats` is ``falcon-gpu stats``.
"""
