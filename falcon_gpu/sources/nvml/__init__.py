"""The NVML source: one :class:`~falcon_gpu.sources.nvml.source.NvmlSource` per agent.

Layout: ``library`` picks pynvml or the simulator; ``calls`` is the one helper
every NVML call goes through (value or ABSENT, never a pynvml exception);
``session`` owns init/shutdown with backoff; ``readers/`` hold one small reader
per concern; ``source`` runs them per device and builds the Snapshot; ``xid``
watches XID events.
"""
