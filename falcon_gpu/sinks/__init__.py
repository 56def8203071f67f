"""Sinks move rendered samples to a destination; only sinks know wire formats.

Add a sink: write ``<type>.py`` here with a class implementing :class:`~falcon_gpu.sinks.base.Sink`,
add its settings model to :mod:`falcon_gpu.sinks.config` and register it in
:mod:`falcon_gpu.sinks.registry`.
"""
