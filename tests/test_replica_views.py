"""The services' replica views are kept between steps (``twin.work.serving.replica_views``) and built
again only when a replica changes or the next starting one warms up. Property: at every step of a
hall where replicas are requested, started, preempted, interrupted by failures and stopped by the
autoscaler, the kept views equal the views built from the job table at that moment."""

from __future__ import annotations

import tomllib

import numpy as np
import pytest

from scenarios.spec import build_simulation, load, validate
from twin.work import serving


def _fresh_views(st: serving.ServiceState, jobs: object, t: int) -> list[tuple[np.ndarray, int, int, int]]:
    """Views built from the job table, leaving the kept ones untouched."""
    kept = (st.views, st.view_ver, st.view_until, st.view_fresh)
    st.view_ver = -1  # forces a rebuild
    try:
        return serving.replica_views(st, jobs, t)  # type: ignore[arg-type]
    finally:
        st.views, st.view_ver, st.view_until, st.view_fresh = kept


@pytest.mark.parametrize("policy", ["priority", "fifo"])
def test_kept_replica_views_equal_views_built_from_the_job_table(policy: str) -> None:
    """``priority``: new replicas preempt training and start at once; ``fifo``: they wait in the
    queue behind training jobs, so a requested replica stays queued across steps."""
    _, text, _ = load("inference-priority")
    data = tomllib.loads(text)
    data.pop("warmup_h", None)
    data["scheduler"]["policy"] = policy
    data["duration_h"] = 48  # the evening surge at 42 h scales the chat service up
    # Failures often enough that replicas are interrupted and restarted within the test (the
    # scenario's own rate gives a few a day): 1e-4 per chip-hour on 2,304 chips, ~5 an hour.
    data.setdefault("failures", {})["chip_hazard_per_h"] = 1e-4
    _, sim = build_simulation(validate(data, "test"))
    cl = sim.pools[0].cluster
    st = cl.svc
    checked = rebuilt_between = 0
    last_ver = -1
    for _ in range(48 * 60):
        sim.advance(1)
        t = sim.t_s
        kept = serving.replica_views(st, cl.jobs, t)
        fresh = _fresh_views(st, cl.jobs, t)
        assert len(kept) == len(fresh)
        for (ks, kw, ku, kn), (fs, fw, fu, fn) in zip(kept, fresh, strict=True):
            assert np.array_equal(ks, fs), f"t={t}: warm slots differ"
            assert (kw, ku, kn) == (fw, fu, fn), f"t={t}: counts differ"
        checked += 1
        if cl.jobs.replica_ver != last_ver:
            rebuilt_between += 1
            last_ver = cl.jobs.replica_ver
    # The run exercised the cache: replicas changed many times, and most steps had none.
    assert rebuilt_between > 20
    assert checked - rebuilt_between > checked // 2
