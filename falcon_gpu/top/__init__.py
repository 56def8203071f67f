"""``falcon-gpu top``: this node's GPUs with their pods and processes, in the terminal.

:mod:`~falcon_gpu.top.frame` turns one cycle (the same snapshot, attribution and health a
``run`` cycle produces) into text; :mod:`~falcon_gpu.top.command` runs the agent's runtime
and cycle without sinks and redraws a frame every interval.
"""
