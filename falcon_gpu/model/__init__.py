"""Typed data passed between the pipeline's stages; no behaviour, no I/O.

Sources produce a :class:`Snapshot`, attribution produces :class:`Attribution`,
schemas turn both into :mod:`falcon_gpu.model.samples` which sinks move.
"""
