"""``falcon-gpu top``: this node's GPUs with their pods and processes, in the terminal.

:mod:`~falcon_gpu.top.frame` turns one cycle (the same snapshot, attribution and health a
``run`` cycle produces) into lines no wider than the terminal; :mod:`~falcon_gpu.top.view`
picks what of them a screen's height shows (every GPU row always, the pods in a scrolling
window); :mod:`~falcon_gpu.top.screen` draws that with curses and takes the keys;
:mod:`~falcon_gpu.top.command` runs the agent's runtime and cycle without sinks.
"""
