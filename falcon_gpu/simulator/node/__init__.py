"""The node around the simulated GPUs, laid out on disk for attribution's real readers.

``layout.SimulatedHost`` writes the proc tree, kubelet log dirs and container
runtime files; ``podresources_server`` is the real kubelet PodResources gRPC
server it starts on a unix socket (a test part, outside the production import graph).
"""
