"""links.csv's windows are workload time: the sampler's first window starts at the
workload's time 0 and each ends near a multiple of the interval, as the model's bins do
(no root: the datapath's counters stood in for by a clock)."""
import time
from types import SimpleNamespace

from testbed.emulation.link_sampler import LinkSampler
from topologies import zcube

RATE = 1_000_000            # bytes per second on every hop, counted from T


def test_windows_start_at_time_zero_and_end_on_multiples_of_the_interval():
    fab = zcube(2, 2)
    start = time.time()
    emu = SimpleNamespace(fabric=fab, link_mbps=100,
                          kernel_counters=lambda unit: int((time.time() - start) * RATE),
                          hop_counter=lambda counters, u, v: counters)
    t0 = start + 0.2                        # time 0 a while after the sampler starts
    with LinkSampler(emu, interval_s=0.1, t0=t0) as sampler:
        time.sleep(0.2 + 0.45)
    hop = (fab.links[0].a, fab.links[0].b)
    rows = [r for r in sampler.rows if (r["src"], r["dst"]) == hop]
    assert len(rows) == 5                   # 4 whole windows and the partial one at the stop
    for k, row in enumerate(rows[:4], start=1):
        assert abs(row["t_s"] - 0.1 * k) < 0.03, rows
        assert abs(row["bytes"] - 0.1 * RATE) < 0.03 * RATE, rows   # nothing from before t0
    assert 0.4 < rows[4]["t_s"] < 0.5
    # the partial window's bytes over a whole interval, as the model's last bin, not over
    # its own few ms (which made a transfer's tail the run's busiest window)
    assert abs(rows[4]["mbps"] - rows[4]["bytes"] * 8 / 0.1 / 1e6) < 0.01, rows
    assert rows[4]["mbps"] < 0.7 * rows[3]["mbps"], rows


def test_a_sampler_stopped_before_time_zero_writes_nothing():
    fab = zcube(2, 2)
    emu = SimpleNamespace(fabric=fab, link_mbps=100, kernel_counters=lambda unit: 0,
                          hop_counter=lambda counters, u, v: counters)
    with LinkSampler(emu, interval_s=0.1, t0=time.time() + 5) as sampler:
        pass
    assert sampler.rows == [] and sampler.error is None
