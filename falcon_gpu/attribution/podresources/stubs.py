"""The generated PodResources modules, loaded as untyped (``Any``) values.

``api_pb2`` / ``api_pb2_grpc`` are protoc output without type information;
importing them through here keeps mypy strict for the hand-written code while
the generated files stay exactly as ``scripts/gen_podresources.sh`` writes them.
"""

from __future__ import annotations

import importlib
from typing import Any

api_pb2: Any = importlib.import_module("falcon_gpu.attribution.podresources.api_pb2")
api_pb2_grpc: Any = importlib.import_module("falcon_gpu.attribution.podresources.api_pb2_grpc")
