"""The soak benchmark (``bench/soak.py``) itself: a few seconds of it meet every target and count
something in every counter that must not stay at zero."""
from __future__ import annotations

import sys

import pytest

from server.config import PROJECT_ROOT

if str(PROJECT_ROOT) not in sys.path:
    sys.path.append(str(PROJECT_ROOT))  # bench/ is not installed: it is imported from the checkout
from bench import soak  # noqa: E402


@pytest.mark.slow
def test_a_short_soak_meets_every_target_and_counts_everything() -> None:
    result = soak.run(soak.Settings(clients=4, seconds=8.0, runaway=1, slow=1, slow_body=1, never_read=1,
                                    never_read_mb=2, flood=2, deadline_s=2.0))
    table = soak.report(result)
    print(table)
    assert result.passed, table
    assert "MISSED" not in table
    assert result.requests > 0
    assert result.runaway_started > 0
    assert any(status == 422 and named for status, named in result.tally.runaway), table  # stopped at the deadline
    assert result.acknowledged_writes > 0
    assert result.tally.sessions
    assert result.tally.held_max > 0
    assert len(result.tally.health) > 10
    assert {path for path, _, _ in result.tally.flood} == set(soak.FLOOD_PATHS), table
    assert result.tally.unread, table
    assert result.rss_resting_mb > 0 and result.tally.rss_mb, table
    malformed = [status for _, status, _ in result.tally.normal if 400 <= status < 500 and status not in (422, 429)]
    assert not malformed, table  # the benchmark's own requests are well formed
