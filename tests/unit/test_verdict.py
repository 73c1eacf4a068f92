"""The one verdict rule: a winner only outside the equivalence margin, level only inside."""
import math

import pytest

from testbed.core.metrics import paired_ratio
from testbed.core.verdict import (
    FLOOR,
    MARGINS,
    margin_for,
    repetitions_for,
    verdict,
    words,
)


def p(ratio, lo, hi, n=10, margin=None):
    out = {"n": n, "ratio": ratio, "lo": lo, "hi": hi}
    if margin is not None:
        out["margin"] = margin
    return out


@pytest.mark.parametrize("lo,hi,want", [
    (0.80, 0.95, "other"),          # wholly below the band: the other run is lower
    (1.05, 1.30, "ref"),            # wholly above: the reference is lower
    (0.995, 1.005, "level"),        # wholly inside 1 +/- 1%
    (0.992, 0.998, "level"),        # off 1 but inside the band: no difference to call
    (0.985, 0.995, "unclear"),      # below 1 but crossing the band's edge: not a winner
    (1.004, 1.02, "unclear"),       # the A/A case: separated from 1, not from the margin
    (0.90, 1.10, "unclear"),        # wide
])
def test_the_rule_names_a_winner_only_outside_the_margin_and_level_only_inside(lo, hi, want):
    assert verdict(p((lo + hi) / 2, lo, hi)) == want


def test_the_band_is_symmetric_in_logs_so_swapping_the_runs_swaps_the_winner():
    m = 0.05
    a = p(0.94, 0.93, 0.951, margin=m)        # 1 / 1.05 = 0.952: just outside
    b = p(1 / 0.94, 1 / 0.951, 1 / 0.93, margin=m)
    assert verdict(a) == "other" and verdict(b) == "ref"
    assert verdict(p(0.953, 0.9525, 0.96, margin=m)) == "level"


def test_a_margin_carried_by_the_ratio_or_given_wins_over_the_floor():
    q = p(1.015, 1.012, 1.018)
    assert verdict(q) == "ref"                         # outside 1%
    assert verdict(dict(q, margin=0.02)) == "level"    # inside 2%
    assert verdict(q, margin=0.015) == "unclear"


def test_no_interval_gives_no_verdict():
    assert verdict(None) == "unclear" and verdict(p(0.5, None, None, n=1)) == "unclear"
    one = paired_ratio([10.0, None], [9.0, 8.0])
    assert one["lo"] is None and verdict(one) == "unclear"


def test_words():
    assert words(p(0.8, 0.7, 0.9), "zcube", "roft") == "roft lower"
    assert words(p(1.2, 1.1, 1.3), "zcube", "roft") == "zcube lower"
    assert words(p(1.0, 0.999, 1.001), "zcube", "roft") == "level"
    assert words(p(1.0, 0.9, 1.1), "zcube", "roft") == "not separated"


def test_margins_are_at_least_the_floor_and_the_larger_backend_counts():
    assert FLOOR == 0.01
    for backend, figures in MARGINS.items():
        assert all(m >= FLOOR for m in figures.values()), backend
    assert margin_for("FCT p99 ms", "model") == FLOOR
    assert margin_for("FCT p99 ms", "model", "emulation") == MARGINS["emulation"]["FCT p99 ms"]
    assert margin_for("FCT p99 ms", None, "unknown") == FLOOR


def test_a_fabric_against_itself_is_never_a_winner_when_its_offset_is_within_the_margin():
    # a bring-up that moves every repetition by the same 0.7%: the interval leaves 1 but
    # stays within the emulation's margin, so no winner
    base = [100.0, 90.0, 110.0, 95.0, 105.0, 100.0, 98.0, 102.0]
    noise = [1.002, 0.999, 1.001, 0.998, 1.0, 1.001, 0.999, 1.0]
    shifted = [b * 1.007 * e for b, e in zip(base, noise)]
    q = paired_ratio(base, shifted)
    assert q["lo"] > 1                                  # the old rule named a winner
    q["margin"] = margin_for("FCT p50 ms", "emulation")
    assert verdict(q) != "ref" and verdict(q) != "other"


def test_the_repetitions_a_ratio_would_need_follow_its_spread():
    ref, other = [10.0] * 5, [9.5, 15.0, 11.0, 16.0, 12.5]    # about 1.25, wide
    q = paired_ratio(ref, other)
    assert verdict(q) == "unclear"
    need = repetitions_for(q)
    assert 5 < need < 40
    cycles = -(-need // 5)                              # whole copies: the same spread
    assert verdict(paired_ratio(ref * cycles, other * cycles)) == "ref"
    # about 1.0: level needs the interval inside 1 +/- 1%, which takes many more
    flat = paired_ratio([10.0] * 4, [9.9, 10.1, 10.05, 9.96])
    assert verdict(flat) == "unclear"
    k = repetitions_for(flat)
    assert k > 4
    assert verdict(paired_ratio([10.0] * 4 * k, [9.9, 10.1, 10.05, 9.96] * k)) == "level"
    assert repetitions_for(paired_ratio([10.0] * 3, [8.0] * 3)) == 3    # has one already
    assert repetitions_for(paired_ratio([10.0, 10.0], [1.0, 100.0]), most=50) is None
    assert repetitions_for(paired_ratio([10.0], [9.0])) is None         # no interval
    on_edge = {"n": 5, "ratio": math.exp(math.log(1.01)), "lo": 0.99, "hi": 1.03}
    assert repetitions_for(on_edge) is None
