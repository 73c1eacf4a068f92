"""What the live view shows comes from one state: phases in order, transfers done out of
the run's total over several workloads, the FCT so far (numpy's percentiles of every
verified transfer of the run), failures, and the link windows of the run's own sampler
taking precedence over the view's."""
import numpy as np
import pytest

from testbed.core.live_state import Live
from topologies import zcube


def _rows(fcts, verified=True):
    return [{"fct_ms": f, "verified": verified} for f in fcts]


def test_transfers_and_fct_so_far_over_two_workloads():
    live = Live()
    live.reset(zcube(2, 2), run="zc")
    live.workload_started(4)
    assert live.status()["phase"] == "workload" and live.status()["transfers"] == {
        "done": 0, "total": 4}
    live.transfers_progress(0.5, _rows([10.0, 30.0]) + _rows([None]))
    s = live.status()
    assert s["transfers"]["done"] == 2 and s["fct_ms"] == {"p50": 20.0, "p99": 29.8, "n": 2}
    live.workload_finished(_rows([10.0, 30.0, 50.0]) + _rows([99.0], verified=False))
    live.workload_started(2)
    live.workload_finished(_rows([70.0, 90.0]))
    s = live.status()
    assert s["transfers"] == {"done": 6, "total": 6} and s["phase"] == "idle"
    want = [10.0, 30.0, 50.0, 70.0, 90.0]
    assert s["fct_ms"] == {"p50": round(float(np.percentile(want, 50)), 2),
                           "p99": round(float(np.percentile(want, 99)), 2), "n": 5}
    live.reset(zcube(2, 2), run="next")                  # a new run starts from nothing
    assert live.status()["transfers"] == {"done": 0, "total": 0}
    assert live.status()["fct_ms"] is None


def test_a_runs_sampler_speaks_for_its_time_and_unknown_phases_are_refused():
    live = Live()
    row = {"t_s": 0.5, "src": "g0", "dst": "a0", "bytes": 1, "mbps": 1.0, "util": 0.5}
    live.sampler_started()
    live.publish_links([dict(row, util=0.9)], "idle")      # ignored: the run's sampler runs
    assert live.links() == []
    live.publish_links([row], "run")
    assert live.links()[0]["util"] == 0.5 and live.status()["links_source"] == "run"
    live.sampler_stopped()
    live.publish_links([dict(row, util=0.1)], "idle")
    assert live.links()[0]["util"] == 0.1
    live.failures_now({"switches": ["b1"]})
    assert live.status()["failures"] == {"switches": ["b1"], "host_ports": [], "links": []}
    assert live.failure_events == 1
    with pytest.raises(ValueError):
        live.phase("warp")
