"""The real-server fixtures of tests/delivery, for the job-record tests."""

from tests.delivery.conftest import pushgateway, telemetry

__all__ = ["pushgateway", "telemetry"]
