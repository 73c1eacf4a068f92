"""Request arrivals: Poisson and bursty generators, Mooncake trace replay, summaries."""
from __future__ import annotations

import json
import statistics
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traffic.arrivals import (
    MAX_TOKENS,
    MOONCAKE_TRACE,
    SKIPPED_KEPT,
    bursty,
    poisson,
    read_trace,
    summary,
)
from traffic.types import Request


def _gaps(reqs):
    return [b.arrival_s - a.arrival_s for a, b in zip(reqs, reqs[1:])]


# -- poisson ------------------------------------------------------------------------------------

def test_poisson_is_deterministic_per_seed():
    a = poisson(5.0, count=200, seed=7, input_tokens=(8000, 0.5))
    assert a == poisson(5.0, count=200, seed=7, input_tokens=(8000, 0.5))
    assert a != poisson(5.0, count=200, seed=8, input_tokens=(8000, 0.5))


def test_poisson_count_gives_exactly_count_ordered_requests():
    reqs = poisson(3.0, count=50, input_tokens=100, output_tokens=7)
    assert [r.id for r in reqs] == list(range(50))
    assert all(g > 0 for g in _gaps(reqs)) and reqs[0].arrival_s > 0
    assert {(r.input_tokens, r.output_tokens, r.cached_tokens) for r in reqs} == {(100, 7, 0)}
    assert poisson(3.0, count=0) == []


def test_poisson_duration_stops_before_the_end_and_extends_the_count_run():
    reqs = poisson(20.0, duration_s=10.0, seed=3)
    assert reqs and reqs[-1].arrival_s < 10.0
    longer = poisson(20.0, count=len(reqs) + 1, seed=3)
    assert longer[:-1] == reqs and longer[-1].arrival_s >= 10.0   # same stream, cut at 10 s


def test_poisson_mean_rate_and_exponential_gaps():
    reqs = poisson(10.0, count=20_000, seed=1)
    gaps = _gaps(reqs)
    assert summary(reqs)["rate_per_s"] == pytest.approx(10.0, rel=0.03)
    cv = statistics.pstdev(gaps) / statistics.fmean(gaps)
    assert cv == pytest.approx(1.0, abs=0.03)


def test_poisson_lognormal_sizes_have_the_requested_mean():
    reqs = poisson(10.0, count=20_000, seed=2, input_tokens=(12_000, 0.5), output_tokens=(300, 1.0))
    assert statistics.fmean(r.input_tokens for r in reqs) == pytest.approx(12_000, rel=0.03)
    assert statistics.fmean(r.output_tokens for r in reqs) == pytest.approx(300, rel=0.05)
    assert len({r.input_tokens for r in reqs}) > 1000 and min(r.output_tokens for r in reqs) >= 1


def test_token_model_does_not_move_arrivals():
    fixed = poisson(4.0, count=100, seed=5)
    drawn = poisson(4.0, count=100, seed=5, input_tokens=(9000, 1.0))
    assert [r.arrival_s for r in fixed] == [r.arrival_s for r in drawn]


@pytest.mark.parametrize("kwargs, name", [
    (dict(rate_per_s=0, count=5), "rate_per_s"),
    (dict(rate_per_s=-1, count=5), "rate_per_s"),
    (dict(rate_per_s=1), "count and duration_s"),
    (dict(rate_per_s=1, count=5, duration_s=5), "count and duration_s"),
    (dict(rate_per_s=1, count=-1), "count"),
    (dict(rate_per_s=1, duration_s=-1), "duration_s"),
    (dict(rate_per_s=1, count=5, input_tokens=-1), "input_tokens"),
    (dict(rate_per_s=1, count=5, output_tokens=-3), "output_tokens"),
    (dict(rate_per_s=1, count=5, input_tokens=(-10, 0.5)), "input_tokens mean"),
    (dict(rate_per_s=1, count=5, output_tokens=(100, -1)), "output_tokens sigma"),
    (dict(rate_per_s=1, count=5, input_tokens="big"), "input_tokens"),
])
def test_poisson_bad_inputs_name_the_parameter(kwargs, name):
    with pytest.raises(ValueError, match=name):
        poisson(**kwargs)


# -- bursty -------------------------------------------------------------------------------------

def test_bursty_has_no_arrivals_in_off_periods():
    reqs = bursty(50.0, on_s=0.5, off_s=1.5, duration_s=100.0, seed=4)
    phases = [r.arrival_s % 2.0 for r in reqs]
    assert reqs and max(phases) < 0.5
    assert [r.id for r in reqs] == list(range(len(reqs))) and all(g >= 0 for g in _gaps(reqs))
    assert reqs[-1].arrival_s < 100.0


def test_bursty_long_run_rate():
    reqs = bursty(40.0, on_s=1.0, off_s=3.0, count=20_000, seed=6)
    assert len(reqs) / reqs[-1].arrival_s == pytest.approx(40.0 * 1 / 4, rel=0.03)


def test_bursty_without_off_time_is_poisson():
    assert bursty(7.0, on_s=2.0, off_s=0, count=300, seed=9) == poisson(7.0, count=300, seed=9)


@pytest.mark.parametrize("kwargs, name", [
    (dict(rate_on_per_s=0, on_s=1, off_s=1, count=5), "rate_per_s"),
    (dict(rate_on_per_s=1, on_s=0, off_s=1, count=5), "on_s"),
    (dict(rate_on_per_s=1, on_s=1, off_s=-1, count=5), "off_s"),
    (dict(rate_on_per_s=1, on_s=1, off_s=1), "count and duration_s"),
])
def test_bursty_bad_inputs_name_the_parameter(kwargs, name):
    with pytest.raises(ValueError, match=name):
        bursty(**kwargs)


# -- the shipped Mooncake trace ------------------------------------------------------------------

@pytest.fixture(scope="module")
def trace():
    return read_trace(MOONCAKE_TRACE)


@pytest.fixture(scope="module")
def cached_trace():
    return read_trace(MOONCAKE_TRACE, prefix_cache=True)


def test_real_trace_reads_whole(trace):
    s = summary(trace.requests)
    assert (trace.lines, s["count"], trace.skipped_count, trace.excluded) == (12_031, 12_031, 0, 0)
    assert round(s["mean_input_tokens"], 3) == 12_035.061
    assert s["duration_s"] == pytest.approx(3536.999)                 # about one hour
    assert trace.requests[0].arrival_s == 0.0 and s["cached_tokens"] == 0
    assert [r.id for r in trace.requests] == list(range(12_031))


def test_time_scale_halves_arrivals(trace):
    fast = read_trace(MOONCAKE_TRACE, time_scale=0.5, limit=2000)
    assert len(fast.requests) == 2000 and fast.excluded == 12_031 - 2000
    for a, b in zip(fast.requests, trace.requests):
        assert a.arrival_s == pytest.approx(b.arrival_s / 2)
        assert (a.id, a.input_tokens, a.output_tokens) == (b.id, b.input_tokens, b.output_tokens)


def test_window_selects_by_original_time_and_rebases(trace):
    w = read_trace(MOONCAKE_TRACE, start_s=600, duration_s=300)
    inside = [r for r in trace.requests if 600 <= r.arrival_s < 900]
    assert len(w.requests) == len(inside) > 0 and w.excluded == 12_031 - len(inside)
    assert w.requests[0].arrival_s == 0.0 and w.requests[-1].arrival_s < 300
    t0 = inside[0].arrival_s
    assert [r.arrival_s for r in w.requests] == pytest.approx([r.arrival_s - t0 for r in inside])
    assert [r.input_tokens for r in w.requests] == [r.input_tokens for r in inside]
    assert len(read_trace(MOONCAKE_TRACE, start_s=600, duration_s=300, limit=10).requests) == 10


def test_prefix_cache(cached_trace):
    reqs = cached_trace.requests
    assert reqs[0].cached_tokens == 0
    assert sum(r.cached_tokens > 0 for r in reqs) > 1000
    assert all(0 <= r.cached_tokens <= r.input_tokens for r in reqs)
    assert all(r.cached_tokens % 512 == 0 or r.cached_tokens == r.input_tokens for r in reqs)
    assert summary(reqs)["cached_tokens"] == 54_098_411


def test_bad_arguments_and_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        read_trace(tmp_path / "nope.jsonl")
    for kwargs, name in [(dict(time_scale=0), "time_scale"), (dict(start_s=-1), "start_s"),
                         (dict(duration_s=0), "duration_s"), (dict(limit=-1), "limit")]:
        with pytest.raises(ValueError, match=name):
            read_trace(MOONCAKE_TRACE, **kwargs)


# -- small traces -------------------------------------------------------------------------------

def _write(path: Path, lines) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def _line(ts=0, inp=1000, out=10, hashes=(0, 1)) -> str:
    return json.dumps(dict(timestamp=ts, input_length=inp, output_length=out,
                           hash_ids=list(hashes)))


def test_malformed_lines_are_reported_with_line_and_reason(tmp_path):
    f = _write(tmp_path / "t.jsonl", [
        _line(0), "{not json", "", json.dumps({"timestamp": 5, "output_length": 3}),
        _line(10, inp="2048"), "   ", _line(20, out=-4), _line(30, inp=700), "[1, 2]"])
    r = read_trace(f)
    assert r.lines == 9 and r.excluded == 0
    assert [(n, reason.split(":")[0]) for n, reason in r.skipped] == [
        (2, "not JSON"), (4, "missing field input_length"), (5, "wrong type"),
        (7, "negative value"), (9, "not a JSON object")]
    assert "input_length is str" in r.skipped[2][1] and "output_length = -4" in r.skipped[3][1]
    assert [(q.id, q.arrival_s, q.input_tokens) for q in r.requests] == [(0, 0.0, 1000),
                                                                       (1, 0.03, 700)]


def test_a_line_that_is_not_utf8_is_skipped_by_number_and_the_good_lines_replay(tmp_path):
    f = tmp_path / "bytes.jsonl"
    f.write_bytes(_line(0).encode() + b"\n" + b'{"timestamp": 1\xeb}\n'
                  + _line(10, inp=700).encode() + b"\n")
    r = read_trace(f)
    assert r.lines == 3 and r.skipped == [(2, "not UTF-8 text (byte 16)")]
    assert [(q.arrival_s, q.input_tokens) for q in r.requests] == [(0.0, 1000), (0.01, 700)]


def test_a_folder_is_not_a_trace_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="is a folder"):
        read_trace(tmp_path)


def test_empty_trace_and_backwards_timestamps(tmp_path):
    empty = read_trace(_write(tmp_path / "e.jsonl", []))
    assert (empty.requests, empty.skipped, empty.lines) == ([], [], 0)
    blank = read_trace(_write(tmp_path / "b.jsonl", ["", " "]))
    assert (blank.requests, blank.skipped, blank.lines) == ([], [], 2)
    r = read_trace(_write(tmp_path / "o.jsonl", [_line(5000, inp=1), _line(2000, inp=2),
                                                 _line(2000, inp=3)]))
    assert [(q.id, q.arrival_s, q.input_tokens) for q in r.requests] == [
        (0, 0.0, 2), (1, 0.0, 3), (2, 3.0, 1)]                        # stably sorted, re-based
    assert summary([])["count"] == 0 and summary(r.requests)["rate_per_s"] == pytest.approx(2 / 3)


def test_prefix_cache_counts_leading_seen_blocks_only(tmp_path):
    f = _write(tmp_path / "p.jsonl", [_line(0, 2000, hashes=[1, 2, 3]),
                                      _line(1, 5000, hashes=[1, 2, 9, 3]),   # 2 leading seen
                                      _line(2, 700, hashes=[1, 2, 9]),       # capped at 700
                                      _line(3, 900, hashes=[4, 1])])         # first unseen
    assert [q.cached_tokens for q in read_trace(f, prefix_cache=True).requests] == [0, 1024, 700, 0]
    assert [q.cached_tokens for q in read_trace(f).requests] == [0, 0, 0, 0]
    # the cache starts empty at the window: the 2nd line is now the first request
    assert read_trace(f, start_s=0.001, prefix_cache=True).requests[0].cached_tokens == 0


def test_summary_of_known_requests():
    reqs = [Request(i, float(i), 100 * (i + 1), 10, 5) for i in range(100)]
    s = summary(reqs)
    assert (s["count"], s["duration_s"], s["rate_per_s"]) == (100, 99.0, 1.0)
    # percentiles are numpy's default (linear between the two nearest ranks)
    assert (s["mean_input_tokens"], s["p50_input_tokens"]) == (5050, 5050)
    assert s["p99_input_tokens"] == pytest.approx(9901)
    assert (s["mean_output_tokens"], s["cached_tokens"]) == (10, 500)


KINDS = {
    "good": lambda ts: _line(ts),
    "bad_json": lambda ts: '{"timestamp": %d,' % ts,
    "missing": lambda ts: json.dumps({"timestamp": ts, "input_length": 5}),
    "string": lambda ts: _line(ts, out="5"),
    "negative": lambda ts: _line(ts, inp=-1),
    "zero_in": lambda ts: _line(ts, inp=0),
    "zero_out": lambda ts: _line(ts, out=0),
    "too_long": lambda ts: _line(ts, inp=10**13),
    "blank": lambda ts: "",
    "spaces": lambda ts: "  \t",
}
BLANK = ("blank", "spaces")


@settings(max_examples=60, deadline=None, database=None)
@given(st.lists(st.tuples(st.sampled_from(sorted(KINDS)), st.integers(0, 10**7)), max_size=30))
def test_every_non_blank_line_is_a_request_or_skipped(mix):
    kinds = [k for k, _ in mix]
    with tempfile.TemporaryDirectory() as d:
        f = _write(Path(d) / "t.jsonl", [KINDS[k](ts) for k, ts in mix])
        r = read_trace(f, prefix_cache=True)
    assert len(r.requests) + r.skipped_count == len([k for k in kinds if k not in BLANK])
    assert len(r.requests) == kinds.count("good") and r.lines == len(kinds) and r.excluded == 0
    assert [n for n, _ in r.skipped] == [i + 1 for i, k in enumerate(kinds)
                                         if k not in BLANK + ("good",)]
    assert all(0 <= g for g in _gaps(r.requests)) and [q.id for q in r.requests] == list(
        range(len(r.requests)))


def test_zero_and_oversized_lengths_are_skipped_and_move_no_good_arrival(tmp_path):
    f = _write(tmp_path / "t.jsonl", [_line(0, inp=0), _line(10, out=0), _line(1000),
                                      _line(20, inp=MAX_TOKENS + 1), _line(1500),
                                      _line(1250)])
    r = read_trace(f)
    assert [(n, why.split(":")[0]) for n, why in r.skipped] == [
        (1, "zero input_length"), (2, "zero output_length"),
        (4, "input_length = 10000001 above the limit of 10,000,000 tokens")]
    # the good lines keep their own times: 1.0, 1.25 and 1.5 s, from the first good one
    assert [q.arrival_s for q in r.requests] == [0.0, 0.25, 0.5]
    assert (r.skipped_count, r.out_of_order) == (3, 1)


def test_only_the_first_skipped_lines_are_kept_but_all_are_counted(tmp_path):
    f = _write(tmp_path / "t.jsonl", ["x"] * (SKIPPED_KEPT + 5) + [_line(0)])
    r = read_trace(f)
    assert (len(r.skipped), r.skipped_count, len(r.requests)) == (SKIPPED_KEPT,
                                                                  SKIPPED_KEPT + 5, 1)
