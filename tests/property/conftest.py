"""Hypothesis settings of the property tests: derandomized (each run draws the same examples,
so CI is deterministic) with modest example counts; ``RADHARMONY_PROPERTY_EXAMPLES=2000``
draws that many random examples per test instead, to hunt for new bugs."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_HUNT = os.environ.get("RADHARMONY_PROPERTY_EXAMPLES")
settings.register_profile(
    "radharmony-property", derandomize=_HUNT is None, database=None, deadline=None,
    max_examples=int(_HUNT or 100), print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                           HealthCheck.data_too_large])
