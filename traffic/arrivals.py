"""Request arrivals for PD workloads: synthetic (Poisson, bursty; deterministic for a seed)
and Mooncake trace replay, as :class:`traffic.types.Request` records in arrival order."""
from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Union

import numpy as np

from traffic.types import Request

MOONCAKE_TRACE = Path(__file__).resolve().parent / "data" / "mooncake_conversation_trace.jsonl"
BLOCK_TOKENS = 512                       # tokens per Mooncake prefix block (one hash id)
TRACE_FIELDS = ("timestamp", "input_length", "output_length")

Tokens = Union[int, tuple[float, float]]


# -- synthetic arrivals -------------------------------------------------------------------------

def _positive(name: str, value) -> float:
    """``value`` as a float, or ValueError naming ``name`` unless it is finite and > 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def _sizer(name: str, spec, rng: random.Random) -> Callable[[], int]:
    """A draw of token counts: a fixed int >= 0, or ``(mean, sigma)`` lognormal clipped to >= 1."""
    if isinstance(spec, int) and not isinstance(spec, bool):
        if spec < 0:
            raise ValueError(f"{name} must be >= 0, got {spec}")
        return lambda: spec
    if isinstance(spec, tuple) and len(spec) == 2:
        mean = _positive(f"{name} mean", spec[0])
        sigma = spec[1]
        if isinstance(sigma, bool) or not isinstance(sigma, (int, float)) \
                or not math.isfinite(sigma) or sigma < 0:
            raise ValueError(f"{name} sigma must be a finite number >= 0, got {sigma!r}")
        mu = math.log(mean) - sigma * sigma / 2        # E[lognormal(mu, sigma)] == mean
        return lambda: max(1, round(rng.lognormvariate(mu, sigma)))
    raise ValueError(f"{name} must be an int or a (mean, sigma) tuple, got {spec!r}")


def _stop(count, duration_s) -> tuple[Optional[int], Optional[float]]:
    """Validate that exactly one of ``count`` (int >= 0) and ``duration_s`` (>= 0) is given."""
    if (count is None) == (duration_s is None):
        raise ValueError("exactly one of count and duration_s must be given")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
        raise ValueError(f"count must be an int >= 0, got {count!r}")
    if duration_s is not None and (isinstance(duration_s, bool)
                                   or not isinstance(duration_s, (int, float))
                                   or not math.isfinite(duration_s) or duration_s < 0):
        raise ValueError(f"duration_s must be a finite number >= 0, got {duration_s!r}")
    return count, duration_s


def _generate(rate_per_s, count, duration_s, seed, input_tokens, output_tokens,
              wall: Callable[[float], float]) -> list[Request]:
    """Poisson arrivals at ``rate_per_s`` on an 'active' clock, mapped to wall time by ``wall``
    (monotone).  Arrival gaps and token sizes come from separate seeded streams, so changing the
    size model does not move the arrivals."""
    rate = _positive("rate_per_s", rate_per_s)
    count, duration_s = _stop(count, duration_s)
    times = random.Random(f"arrivals/{seed}")
    sizes = random.Random(f"tokens/{seed}")
    draw_in = _sizer("input_tokens", input_tokens, sizes)
    draw_out = _sizer("output_tokens", output_tokens, sizes)
    out: list[Request] = []
    active = 0.0
    while count is None or len(out) < count:
        active += times.expovariate(rate)
        t = wall(active)
        if duration_s is not None and t >= duration_s:
            break
        out.append(Request(len(out), t, draw_in(), draw_out()))
    return out


def poisson(rate_per_s: float, count: Optional[int] = None, duration_s: Optional[float] = None,
            seed: int = 0, input_tokens: Tokens = 8192,
            output_tokens: Tokens = 256) -> list[Request]:
    """Poisson arrivals (exponential gaps, mean ``1/rate_per_s``) from time 0: exactly ``count``
    requests, or every arrival before ``duration_s`` (exactly one of the two is required)."""
    return _generate(rate_per_s, count, duration_s, seed, input_tokens, output_tokens,
                     lambda t: t)


def bursty(rate_on_per_s: float, on_s: float, off_s: float, count: Optional[int] = None,
           duration_s: Optional[float] = None, seed: int = 0, input_tokens: Tokens = 8192,
           output_tokens: Tokens = 256) -> list[Request]:
    """On/off arrivals: Poisson at ``rate_on_per_s`` during ``[k(on+off), k(on+off)+on)``, none in
    the ``off_s`` gaps that follow, repeating from time 0.  Long-run rate is
    ``rate_on_per_s * on_s / (on_s + off_s)``."""
    on = _positive("on_s", on_s)
    if isinstance(off_s, bool) or not isinstance(off_s, (int, float)) \
            or not math.isfinite(off_s) or off_s < 0:
        raise ValueError(f"off_s must be a finite number >= 0, got {off_s!r}")

    def wall(active: float) -> float:
        k, into = divmod(active, on)                   # k whole on-periods done, `into` the next
        return k * (on + off_s) + into
    return _generate(rate_on_per_s, count, duration_s, seed, input_tokens, output_tokens, wall)


# -- trace replay -------------------------------------------------------------------------------
MAX_TOKENS = 10_000_000        # per request: the longest context windows announced
SKIPPED_KEPT = 1_000           # skipped lines kept by number and reason (all are counted)
_ZERO = {"input_length": "no prompt, no KV cache to move",
         "output_length": "no decode, so no KV transfer"}


@dataclass
class TraceReplay:
    """What ``read_trace`` made of a trace file.  Every non-blank line is accounted for:
    ``len(requests) + skipped_count + excluded`` equals the number of non-blank lines."""
    requests: list[Request] = field(default_factory=list)
    skipped: list[tuple[int, str]] = field(default_factory=list)   # (1-based line, reason)
    lines: int = 0            # lines read, blank ones included
    excluded: int = 0         # well-formed lines outside the start_s/duration_s window or limit
    skipped_count: int = 0    # every skipped line; ``skipped`` keeps the first SKIPPED_KEPT
    out_of_order: int = 0     # replayed lines whose timestamp is before an earlier line's


def _parse(text: str) -> Union[tuple[float, int, int, list], str]:
    """One trace line as ``(timestamp_ms, input, output, hash_ids)``, or the reason it is bad."""
    try:
        rec = json.loads(text)
    except ValueError as e:
        return f"not JSON: {e}"
    if not isinstance(rec, dict):
        return f"not a JSON object: {type(rec).__name__}"
    for name in TRACE_FIELDS:
        if name not in rec:
            return f"missing field {name}"
    ts = rec["timestamp"]
    if isinstance(ts, bool) or not isinstance(ts, (int, float)):
        return f"wrong type: timestamp is {type(ts).__name__}"
    if not math.isfinite(ts):
        return f"timestamp not finite: {ts}"
    for name in ("input_length", "output_length"):
        if isinstance(rec[name], bool) or not isinstance(rec[name], int):
            return f"wrong type: {name} is {type(rec[name]).__name__}"
    for name in TRACE_FIELDS:
        if rec[name] < 0:
            return f"negative value: {name} = {rec[name]}"
    for name in ("input_length", "output_length"):
        if rec[name] == 0:
            return f"zero {name}: {_ZERO[name]}"
        if rec[name] > MAX_TOKENS:
            return f"{name} = {rec[name]} above the limit of {MAX_TOKENS:,} tokens"
    hashes = rec.get("hash_ids", [])
    if not isinstance(hashes, list) or any(isinstance(h, bool) or not isinstance(h, int)
                                           for h in hashes):
        return "wrong type: hash_ids is not a list of integers"
    return ts, rec["input_length"], rec["output_length"], hashes


def _good_lines(path: Path, replay: "TraceReplay") -> list:
    """Every line of the trace that parses, in file order; the others go to
    ``replay.skipped`` by number and reason, and ``replay.lines`` counts them all."""
    good = []
    with path.open("rb") as f:
        for number, raw in enumerate(f, 1):
            replay.lines = number
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                rec = f"not UTF-8 text (byte {err.start + 1})"
            else:
                if not text.strip():
                    continue
                rec = _parse(text)
            if isinstance(rec, str):
                replay.skipped_count += 1
                if len(replay.skipped) < SKIPPED_KEPT:
                    replay.skipped.append((number, rec))
            else:
                replay.out_of_order += bool(good) and rec[0] < good[-1][0]
                good.append(rec)
    return good


def read_trace(path, time_scale: float = 1.0, start_s: float = 0.0,
               duration_s: Optional[float] = None, limit: Optional[int] = None,
               prefix_cache: bool = False) -> TraceReplay:
    """Replay a Mooncake-style JSONL trace as requests: lines ``{"timestamp": ms, "input_length",
    "output_length", "hash_ids"}``, ids naming the prompt's 512-token prefix blocks.

    * The whole file is validated: each malformed line goes to ``skipped`` with its 1-based
      line number and reason (not UTF-8 text, not JSON, not an object, missing field, wrong
      type, non-finite or negative value, a zero length: no prompt means no KV cache and no
      output means no decode, so neither makes a KV transfer; a length above
      ``MAX_TOKENS``); blank lines are ignored.  ``skipped`` keeps the first
      ``SKIPPED_KEPT`` of them, ``skipped_count`` counts all.  ``hash_ids`` is optional
      (default ``[]``).
    * Timestamps going backwards are allowed, not errors (merged logs are not in order):
      requests are stably sorted by timestamp and numbered 0..N-1 in that order, and
      ``out_of_order`` counts the lines before an earlier line's time.  Equal timestamps
      are requests arriving together.  A skipped line has no time: it moves no arrival.
    * ``start_s <= timestamp/1000 < start_s + duration_s`` selects a window by original time
      (``duration_s=None``: to the end), then ``limit`` keeps the first requests of it; the
      rest count as ``excluded``.  Arrivals are re-based so the first selected one is at 0 and
      multiplied by ``time_scale`` (0.5 replays twice as fast).
    * ``prefix_cache=True``: ``cached_tokens`` is 512 x the number of leading hash ids already
      seen in earlier requests of this replay, capped at ``input_tokens``; otherwise 0.
    """
    scale = _positive("time_scale", time_scale)
    if isinstance(start_s, bool) or not isinstance(start_s, (int, float)) \
            or not math.isfinite(start_s) or start_s < 0:
        raise ValueError(f"start_s must be a finite number >= 0, got {start_s!r}")
    end_s = math.inf if duration_s is None else start_s + _positive("duration_s", duration_s)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit must be an int >= 0, got {limit!r}")
    path = Path(path)
    if path.is_dir():
        raise FileNotFoundError(f"trace file not found: {path} is a folder")
    if not path.is_file():
        raise FileNotFoundError(f"trace file not found: {path}")

    replay = TraceReplay()
    good = _good_lines(path, replay)
    good.sort(key=lambda r: r[0])                                  # stable: file order on ties
    chosen = [r for r in good if start_s <= r[0] / 1000 < end_s][:limit]
    replay.excluded = len(good) - len(chosen)

    seen: set = set()
    t0 = chosen[0][0] / 1000 if chosen else 0.0
    for i, (ts, inp, out, hashes) in enumerate(chosen):
        cached = 0
        if prefix_cache:
            lead = next((k for k, h in enumerate(hashes) if h not in seen), len(hashes))
            cached = min(BLOCK_TOKENS * lead, inp)
            seen.update(hashes)
        replay.requests.append(Request(i, (ts / 1000 - t0) * scale, inp, out, cached))
    return replay


# -- summary ------------------------------------------------------------------------------------

def summary(requests: list[Request]) -> dict:
    """Headline numbers of a request list.  ``duration_s`` is last minus first arrival and
    ``rate_per_s`` is gaps per second over it, ``(count - 1) / duration_s`` (0 if undefined);
    percentiles are numpy's default (linear), as everywhere in the testbed."""
    n = len(requests)
    if n == 0:
        return dict(count=0, duration_s=0.0, rate_per_s=0.0, mean_input_tokens=0.0,
                    p50_input_tokens=0, p99_input_tokens=0, mean_output_tokens=0.0,
                    cached_tokens=0)
    times = [r.arrival_s for r in requests]
    inputs = [r.input_tokens for r in requests]
    span = max(times) - min(times)
    p50, p99 = (float(p) for p in np.percentile(inputs, (50, 99)))
    return dict(count=n, duration_s=span, rate_per_s=(n - 1) / span if span > 0 else 0.0,
                mean_input_tokens=sum(inputs) / n, p50_input_tokens=p50,
                p99_input_tokens=p99,
                mean_output_tokens=sum(r.output_tokens for r in requests) / n,
                cached_tokens=sum(r.cached_tokens for r in requests))
