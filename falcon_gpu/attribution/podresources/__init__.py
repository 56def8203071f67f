"""kubelet PodResources v1: the .proto, its generated stubs, a client and a server.

``api.proto`` is written from the v1 API's messages and field numbers;
``api_pb2*.py`` are generated from it by ``scripts/gen_podresources.sh`` and
committed. The client is what the agent uses; the server backs the simulator
and the tests with the same wire protocol the kubelet speaks.
"""

from falcon_gpu.attribution.podresources.client import (
    Allocation,
    KubeletAllocations,
    PodResourcesClient,
    PodResourcesError,
)

__all__ = ["Allocation", "KubeletAllocations", "PodResourcesClient", "PodResourcesError"]
