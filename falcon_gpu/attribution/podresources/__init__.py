"""kubelet PodResources v1: the .proto, its generated stubs and the agent's client.

``api.proto`` is written from the v1 API's messages and field numbers;
``api_pb2*.py`` are generated from it by ``scripts/gen_podresources.sh`` and
committed. The server that plays the kubelet's side of the wire (simulator,
tests) lives in :mod:`falcon_gpu.simulator.node.podresources_server`, outside the
agent's import graph.
"""

from falcon_gpu.attribution.podresources.client import (
    KubeletAllocations,
    PodResourcesClient,
    PodResourcesError,
)
from falcon_gpu.attribution.source import Allocation

__all__ = ["Allocation", "KubeletAllocations", "PodResourcesClient", "PodResourcesError"]
