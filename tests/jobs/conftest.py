"""The real-server fixtures of tests/delivery, for the job-record tests."""

from tests.delivery.conftest import pushgateway

__all__ = ["pushgateway"]
