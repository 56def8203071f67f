"""falcon_gpu: NVIDIA GPU and per-pod GPU metrics, pushed where operations teams already look.

The pipeline (see docs/ARCHITECTURE.md): sources -> attribution -> schemas -> sinks.
"""

__version__ = "0.1.0"
