"""The scrape endpoint (``listen`` setting): ``/metrics``, ``/healthz``, ``/readyz``.

:class:`~falcon_gpu.listen.latest.LatestCycle` is a sink that keeps the newest
rendered cycle; :class:`~falcon_gpu.listen.server.ListenServer` serves it over
HTTP from its own threads, so a scraper never touches the cycle thread.
"""

from falcon_gpu.listen.latest import LatestCycle
from falcon_gpu.listen.server import ListenServer, open_listener

__all__ = ["LatestCycle", "ListenServer", "open_listener"]
