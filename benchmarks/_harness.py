"""Benchmark harness (reference/performance.md §10): ratios of medians measured in one process.

Rules: our path and the anchor path run interleaved in a shuffled order each round (fixed seed), with an
untimed ``gc.collect()`` before every sample (objects that outlive the rounds are ``gc.freeze()``-d first);
at least 40 rounds; the metric's value is the ratio of medians; a metric fails only when it misses its
target in 2 of 3 repeats. Quick mode (smoke) runs few rounds once.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import os
import platform
import random
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

Sample = Callable[[], Any] | Callable[[], Awaitable[Any]]


@dataclass
class Metric:
    """One ratio: ``ours`` / ``anchor`` (``direction="max"``: ratio must be <= target; ``"min"``: >= target).

    ``ours_setup``/``anchor_setup`` run untimed before each sample of that path (e.g. reset a thread).
    ``measure`` replaces the timed samples: called once per repeat with a `Session`, it returns
    ``(ours, anchor)`` in ``unit`` (throughput, p95 latency, bytes, a slope); the ratio is ours / anchor.
    ``target=None`` makes a report-only row (no verdict). ``rounds`` caps the rounds (slow samples).
    """

    name: str
    ours: Sample | None = None
    anchor: Sample | None = None
    target: float | None = 1.0
    direction: Literal["max", "min"] = "max"
    note: str = ""
    ours_setup: Sample | None = None
    anchor_setup: Sample | None = None
    measure: Callable[[Session], tuple[float, float]] | None = None
    unit: str = "µs"
    rounds: int | None = None


@dataclass
class Result:
    metric: Metric
    ratios: list[float] = field(default_factory=list)
    ours_median_us: float = 0.0
    anchor_median_us: float = 0.0
    load1: float = 0.0

    def meets(self, ratio: float) -> bool:
        if self.metric.target is None:
            return True
        if self.metric.direction == "max":
            return ratio <= self.metric.target
        return ratio >= self.metric.target

    @property
    def passed(self) -> bool:
        misses = sum(not self.meets(r) for r in self.ratios)
        return misses < 2 if len(self.ratios) >= 3 else misses == 0

    @property
    def ratio(self) -> float:
        return statistics.median(self.ratios)


def _call(runner: asyncio.Runner, fn: Sample) -> Any:
    if inspect.iscoroutinefunction(fn):
        return runner.run(fn())
    return fn()


def _timed(runner: asyncio.Runner, fn: Sample, setup: Sample | None = None, *, self_timed: bool = False) -> float:
    if setup is not None:
        _call(runner, setup)
    gc.collect()
    if self_timed:  # the sample measures itself (e.g. time to first chunk) and returns that value
        return float(_call(runner, fn))
    if inspect.iscoroutinefunction(fn):
        start = time.perf_counter()
        runner.run(fn())
        return time.perf_counter() - start
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


@dataclass
class Session:
    """What a custom ``measure`` gets: the event loop runner, the rounds and a seeded shuffle."""

    runner: asyncio.Runner
    rounds: int
    rng: random.Random

    def run(self, fn: Sample) -> Any:
        """Call a sync or async zero-arg callable once (untimed) in the harness's event loop."""
        return _call(self.runner, fn)

    def medians(
        self,
        samples: dict[str, Sample],
        setups: dict[str, Sample] | None = None,
        *,
        warmup: int = 2,
        self_timed: bool = False,
    ) -> dict[str, float]:
        """Median seconds of each sample over ``rounds`` interleaved shuffled rounds (gc before each).

        With ``self_timed`` each sample returns its own value (e.g. a time to first chunk, a p95).
        """
        setups = setups or {}
        for key, fn in samples.items():
            for _ in range(warmup):
                _timed(self.runner, fn, setups.get(key), self_timed=self_timed)
        times: dict[str, list[float]] = {key: [] for key in samples}
        # Objects alive now (imports, graphs, pre-filled threads) move to gc's permanent generation, so the
        # untimed gc.collect() before each sample still frees everything the previous samples left behind
        # but no longer walks the whole heap (300 ms per collect on a loaded 2-core box, which alone would
        # blow the suite's time budget).
        gc.collect()
        gc.freeze()
        try:
            for _ in range(self.rounds):
                order = list(samples)
                self.rng.shuffle(order)
                for key in order:
                    times[key].append(_timed(self.runner, samples[key], setups.get(key), self_timed=self_timed))
        finally:
            gc.unfreeze()
        return {key: statistics.median(values) for key, values in times.items()}


def run_metric(metric: Metric, *, rounds: int, repeats: int, seed: int = 1234) -> Result:
    """Measure ``metric`` ``repeats`` times, each with ``rounds`` interleaved, shuffled rounds."""
    result = Result(metric)
    rng = random.Random(seed)
    runner = asyncio.Runner()
    if metric.rounds is not None:
        rounds = min(rounds, metric.rounds)
    try:
        session = Session(runner, rounds, rng)
        if metric.measure is not None:
            ours_values: list[float] = []
            anchor_values: list[float] = []
            for _ in range(repeats):
                ours_value, anchor_value = metric.measure(session)
                result.ratios.append(ours_value / anchor_value)
                ours_values.append(ours_value)
                anchor_values.append(anchor_value)
            result.ours_median_us = statistics.median(ours_values)
            result.anchor_median_us = statistics.median(anchor_values)
            return result
        assert metric.ours is not None and metric.anchor is not None, metric.name
        samples = {"ours": metric.ours, "anchor": metric.anchor}
        setups = {
            key: fn for key, fn in (("ours", metric.ours_setup), ("anchor", metric.anchor_setup)) if fn is not None
        }
        # Warm both paths (imports, caches, first graph compile) outside the timed rounds.
        for key, fn in samples.items():
            for _ in range(3):
                _timed(runner, fn, setups.get(key))
        ours_all: list[float] = []
        anchor_all: list[float] = []
        for _ in range(repeats):
            medians = session.medians(samples, setups, warmup=0)
            result.ratios.append(medians["ours"] / medians["anchor"])
            ours_all.append(medians["ours"])
            anchor_all.append(medians["anchor"])
        result.ours_median_us = statistics.median(ours_all) * 1e6
        result.anchor_median_us = statistics.median(anchor_all) * 1e6
    finally:
        runner.close()
        result.load1 = os.getloadavg()[0]
    return result


def machine_description() -> str:
    from importlib.metadata import PackageNotFoundError, version

    libs = []
    for name in ("langchain-core", "langchain", "langgraph", "langchain-openai", "pydantic", "httpx"):
        try:
            libs.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            pass
    return (
        f"{platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"load1 {os.getloadavg()[0]:.2f}; {', '.join(libs)}"
    )


def format_table(results: list[Result]) -> str:
    lines = [
        "| metric | ratio (median of repeats) | repeats | target | ours | anchor | load1 | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        op = "<=" if r.metric.direction == "max" else ">="
        ratios = ", ".join(f"{x:.3f}" for x in r.ratios)
        target = "report" if r.metric.target is None else f"{op} {r.metric.target:.2f}"
        verdict = "report" if r.metric.target is None else ("pass" if r.passed else "FAIL")
        unit = r.metric.unit
        lines.append(
            f"| {r.metric.name} | {r.ratio:.3f} | {ratios} | {target} | "
            f"{_fmt(r.ours_median_us)} {unit} | {_fmt(r.anchor_median_us)} {unit} | {r.load1:.2f} | {verdict} |"
        )
    return "\n".join(lines)


def _fmt(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"
