"""One local Ray cluster for the whole test session (starting one costs seconds).

Import the fixture into a test module with ``from ray_fixture import ray_cluster``; it skips
the tests cleanly when ``ray`` is not installed.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def ray_cluster():
    """The ``ray`` module, connected to a local 2-CPU cluster shut down at session end."""
    ray = pytest.importorskip("ray")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 logging_level="ERROR")
    yield ray
    if started:
        ray.shutdown()
