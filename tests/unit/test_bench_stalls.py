"""benchmarks/bench_stalls.py: the forwarding thread's passes read from ``perf script``
lines and sorted by what held them (no root, nothing run)."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("bench_stalls",
                                              ROOT / "benchmarks" / "bench_stalls.py")
bs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bs)
NAMES = bs.SYSCALLS["x86_64"]


def enter(t, nr):
    return f"{t:.9f}: raw_syscalls:sys_enter: NR {nr} (50, 7ffe, 20, 20, 0, 0)"


def leave(t, nr):
    return f"{t:.9f}:  raw_syscalls:sys_exit: NR {nr} = -11"


def switch(t, state, to):
    return (f"{t:.9f}:     sched:sched_switch: prev_comm=ovs-vswitchd prev_pid=7 "
            f"prev_prio=120 prev_state={state} ==> next_comm={to} next_pid=9 next_prio=120")


def one_pass(t, body):
    """A poll() return at ``t``, ``body`` (lines), and the next poll() call."""
    return [leave(t, 7)] + body + [enter(body and float(body[-1].split(":")[0]) + 0.0001
                                         or t + 0.0003, 7)]


def lines():
    out = []
    out += one_pass(10.0, [enter(10.0001, 299), leave(10.0002, 299)])          # quick
    out += one_pass(11.0, [enter(11.0001, 46), leave(11.0002, 46)] * 25         # counters
                    + [enter(11.0030, 299), leave(11.0031, 299)])
    out += one_pass(12.0, [enter(12.0001, 299), switch(12.0002, "R", "kdamond.0"),
                           leave(12.0030, 299)])                                  # preempted
    out += one_pass(13.0, [enter(13.0001, 299),                                  # absent:
                           "13.004000000: irq_vectors:local_timer_entry: vector=236",
                           "13.004010000: irq_vectors:local_timer_exit: vector=236",
                           leave(13.0041, 299)])
    out += one_pass(14.0, [enter(14.0001 + i * 0.0004, 299) for i in range(8)])  # busy
    out += one_pass(15.0, [switch(15.0001, "S", "swapper/0"),                    # slept
                           leave(15.0025, 299)])
    return out


def test_passes_are_read_and_sorted():
    events = bs.parse(lines(), 1000.0, NAMES)
    assert events[0] == (1010.0, "exit", "poll")
    got = bs.passes(events)
    assert len(got) == 6
    long_ones = [p for p in got if p["b"] - p["a"] > bs.LONG_S]
    assert [bs.kind_of(p) for p in long_ones] == ["counters", "preempted by kdamond.0",
                                                  "absent", "busy", "busy"]
    assert got[1]["sendmsg"] == 25
    assert abs(got[3]["irq_s"] - 0.00001) < 1e-7


def test_a_gap_ended_by_the_thread_itself_is_not_an_absent_cpu():
    """Only a gap that the local timer's interrupt ends counts as the CPU being away."""
    p = {"sendmsg": 0, "preempted": [], "irq_s": 0.0, "gap": (0.004, "exit")}
    assert bs.kind_of(p) == "busy"
    p["gap"] = (0.004, "irq_in")
    assert bs.kind_of(p) == "absent"
    p["irq_s"] = 0.003                                 # the interrupts themselves took it
    assert bs.kind_of(p) == "busy"


def test_each_stall_goes_to_the_longest_pass_in_flight_with_it():
    long_ones = [{"a": 1.000, "b": 1.003, "sendmsg": 30, "preempted": [], "irq_s": 0,
                  "gap": (0, "")},
                 {"a": 1.0031, "b": 1.010, "sendmsg": 0, "preempted": ["tokio-rt-worker"],
                  "irq_s": 0, "gap": (0, "")}]
    stalls = [(0.9995, 1.0025), (1.002, 1.009), (2.0, 2.003)]
    assert bs.stall_kinds(stalls, long_ones) == {"counters": 1,
                                                 "preempted by tokio-rt-worker": 1,
                                                 "idle": 1}
