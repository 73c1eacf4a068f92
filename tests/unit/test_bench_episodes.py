"""benchmarks/bench_episodes.py ``--from DIR``: a finished run's requests lined up with what
an observer recorded beside it, through ``per_rep[i].t0_unix`` (files written here; no
root, nothing run)."""
import csv
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_episodes.py"
T0 = 1_800_000_000.0
FIELDS = ("request", "chunk", "src", "dst", "start_s", "end_s", "fct_ms", "rep")


def fabric_dir(d: Path, dilation=1, stalls=None):
    """Two repetitions of two requests; rep 1's request 1 (g1 -> g3) is the slow one;
    ``stalls``: each row's ``stall_ms`` (rep 0's two, then rep 1's)."""
    d.mkdir(parents=True)
    (d / "summary.json").write_text(json.dumps({
        "scale": {"time_dilation": dilation},
        "per_rep": [{"seed": 1, "t0_unix": T0}, {"seed": 2, "t0_unix": T0 + 20}]}))
    hosts = [{"id": f"g{i}", "kind": "host", "ports": [{"ip": f"10.0.1.{i}"}]}
             for i in range(4)]
    (d / "fabric.json").write_text(json.dumps({"nodes": hosts + [{"id": "s0"}]}))
    with open(d / "transfers.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(FIELDS + (("stall_ms",) if stalls else ()))
        extra = iter([(x,) for x in stalls] if stalls else [()] * 4)
        for rep in (0, 1):
            w.writerow([0, 0, "g0", "g2", 1.0, 1.015, 15.0, rep, *next(extra)])
            w.writerow([1, 0, "g1", "g3", 2.0, 2.015 if rep == 0 else 2.025,
                        15.0 if rep == 0 else 25.0, rep, *next(extra)])


def call(out, observe):
    return subprocess.run([sys.executable, str(SCRIPT), "--from", str(out), "--observe",
                           observe], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def test_probertt_acks_are_matched_to_the_transfer_in_flight_on_that_pairing(tmp_path):
    fabric_dir(tmp_path / "run" / "roft")
    at = T0 + 20 + 2.010 + 5.0                           # TAI is 5 s ahead in this trace
    (tmp_path / "tcp_probe.txt").write_text(
        "# offset 5.000000\n"
        f"  python-1 [000] ..s2. {at:.6f}: tcp_probe: family=AF_INET src=10.0.1.1:40000 "
        "dest=10.0.1.3:7001 mark=0x0 data_len=0 snd_cwnd=4\n"
        f"  python-1 [000] ..s2. {at:.6f}: tcp_probe: family=AF_INET src=10.0.1.0:40000 "
        "dest=10.0.1.2:5001 mark=0x0 data_len=0 snd_cwnd=4\n")      # not a KV connection
    out = call(tmp_path, "probertt")
    assert "rep 1 req 1 1.67x (1)" in out                 # the slowest, and in ProbeRTT
    assert "requests with a transfer in ProbeRTT: 1 of 4, at 1.67x the median" in out


def test_probes_and_pacing_are_read_inside_each_request_with_time_dilated(tmp_path):
    fabric_dir(tmp_path / "run" / "zcube", dilation=2)   # rep 1 req 1: T0+24 .. T0+24.05
    (tmp_path / "oneway1.txt").write_text(                # sent, received
        f"{T0 + 24.02:.6f} {T0 + 24.0295:.6f}\n"
        f"{T0 + 2.01:.6f} {T0 + 2.0105:.6f}\n"
        f"{T0 + 21:.6f} {T0 + 21.0025:.6f}\n"              # in rep 1, no transfer in flight
        f"{T0 + 30:.6f} {T0 + 30.1:.6f}\n")                # after every repetition
    out = call(tmp_path, "oneway")
    assert "no transfer in flight: 1, one-way median 2.50 ms" in out and "over 2 ms: 1" in out
    assert "rep 1 req 1 1.67x (9.50)" in out and "rep 0 req 0 1.00x (0.50)" in out
    (tmp_path / "ss.txt").write_text(
        f"@@ {T0 + 23.5:.6f} 100\n"
        "State Recv-Q Send-Q Local Address:Port Peer Address:Port\n"
        "0      0          10.0.1.1:40000     10.0.1.3:7001\n"
        "\t bbr wscale:7,7 bbr:(bw:30000000bps,mrtt:1.2) pacing_rate 37500000bps\n"
        f"@@ {T0 + 1.5:.6f} 100\n"                      # rep 0, not rep 1's connection
        "0      0          10.0.1.0:40001     10.0.1.2:7001\n"
        "\t bbr wscale:7,7 bbr:(bw:90000000bps,mrtt:1.2) pacing_rate 99000000bps\n")
    out = call(tmp_path, "bbr")
    assert "rep 1 req 1 1.67x (37.50)" in out and "rep 0 req 0 1.00x (99.00)" in out
    assert "rep 1 req 0 1.00x (-)" in out                  # no record since its rep began


def test_the_stalls_a_runs_transfers_went_through_are_read_from_its_own_record(tmp_path):
    fabric_dir(tmp_path / "zcube", stalls=[0.0, 0.0, 0.0, 4.2])   # a bench_repeat run's layout
    out = call(tmp_path, "stalls")
    assert "rep 1 req 1 1.67x (4.20)" in out and "rep 0 req 0 1.00x (0.00)" in out
    assert "transfers through a stall: 1 of 4; of the slowest 1% 1 of 1" in out
    assert "FCT p99 24.70 ms over all, 15.00 over those through none" in out


def test_a_runs_verdicts_are_computed_again_without_the_transfers_through_a_stall(tmp_path):
    """Both fabrics of a run paired by seed, over every transfer and over those through no
    stall: ZCube's one slow transfer went through a stall, ROFT's same one did not."""
    fabric_dir(tmp_path / "zcube", stalls=[0.0, 0.0, 0.0, 4.2])
    fabric_dir(tmp_path / "roft", stalls=[0.0] * 4)
    (tmp_path / "run.json").write_text(json.dumps({"runs": ["zcube", "roft"]}))
    line = next(x for x in call(tmp_path, "stalls").splitlines() if "paired by seed" in x)
    assert line.startswith(f"== {tmp_path.name}: FCT roft/zcube, paired by seed: ")
    assert "p99 all 1.000 (1.000-1.000) level" in line       # the same transfers, alike
    assert "p99 through none 1.288 (" in line                # ZCube's slow one left out
    assert "p50 through none" in line


def test_each_datapath_stall_is_put_down_to_what_held_a_cpu_while_it_was_in_flight():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from episode_observers import holders, long_stretches, timehist_runs
    text = """           time    cpu  task name                       wait time  sch delay   run
                        [tid/pid]                          (msec)     (msec)     (msec)
--------------- ------  ------------------------------  ---------  ---------  ---------
   100.004000 [0001]  kdamond.0[83]                     510.552      0.016      3.991
   100.004500 [0000]  ovs-vswitchd[22454]                 3.991      0.000      0.464
   100.009000 [0000]  <idle>                              0.066      0.000      4.204
   100.020000 [0001]  perf[22754/22752]                1000.355      0.037      2.021
   100.031000 [0000]  ovs-vswitchd[22454]                 0.000      0.000      4.524
"""
    runs = timehist_runs(text, 1000.0)
    assert [(round(a, 6), b, t) for a, b, t in runs][:2] == [
        (1100.000009, 1100.004, "kdamond.0"), (1100.004036, 1100.0045, "ovs-vswitchd")]
    stalls = [(1100.001, 1100.0045), (1100.027, 1100.030), (1100.040, 1100.043),
              (1100.018, 1100.0195)]
    # kdamond held a CPU through the first; ovs-vswitchd's own 4.5 ms the second; nothing
    # the third; the fourth overlapped only perf and a short stretch, which do not count
    assert holders(stalls, runs) == {"(none)": 2, "kdamond.0": 1, "ovs-vswitchd": 1}
    # the idle task, perf and stretches under 1 ms are not counted
    assert long_stretches(runs) == ("kdamond.0 1 (median 4.0 ms, max 4.0), ovs-vswitchd 1 "
                                    "(median 4.5 ms, max 4.5)")
