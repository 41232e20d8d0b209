"""Benchmark harness (reference/performance.md §10): ratios of medians measured in one process.

Rules: our path and the anchor path run interleaved in a shuffled order each round (fixed seed), with an
untimed ``gc.collect()`` before every sample; at least 40 rounds; the metric's value is the ratio of medians;
a metric fails only when it misses its target in 2 of 3 repeats. Quick mode (smoke) runs few rounds once.
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
    """One ratio: ``ours`` / ``anchor`` (``direction="max"``: ratio must be <= target; ``"min"``: >= target)."""

    name: str
    ours: Sample
    anchor: Sample
    target: float
    direction: Literal["max", "min"] = "max"
    note: str = ""


@dataclass
class Result:
    metric: Metric
    ratios: list[float] = field(default_factory=list)
    ours_median_us: float = 0.0
    anchor_median_us: float = 0.0
    load1: float = 0.0

    def meets(self, ratio: float) -> bool:
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


def _timed(runner: asyncio.Runner, fn: Sample) -> float:
    gc.collect()
    if inspect.iscoroutinefunction(fn):
        start = time.perf_counter()
        runner.run(fn())
        return time.perf_counter() - start
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def run_metric(metric: Metric, *, rounds: int, repeats: int, seed: int = 1234) -> Result:
    """Measure ``metric`` ``repeats`` times, each with ``rounds`` interleaved, shuffled rounds."""
    result = Result(metric)
    rng = random.Random(seed)
    runner = asyncio.Runner()
    try:
        # Warm both paths (imports, caches, first graph compile) outside the timed rounds.
        for fn in (metric.ours, metric.anchor):
            for _ in range(3):
                _timed(runner, fn)
        ours_all: list[float] = []
        anchor_all: list[float] = []
        for _ in range(repeats):
            ours: list[float] = []
            anchor: list[float] = []
            for _ in range(rounds):
                order = [("ours", metric.ours), ("anchor", metric.anchor)]
                rng.shuffle(order)
                for label, fn in order:
                    (ours if label == "ours" else anchor).append(_timed(runner, fn))
            result.ratios.append(statistics.median(ours) / statistics.median(anchor))
            ours_all += ours
            anchor_all += anchor
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
        "| metric | ratio (median of repeats) | repeats | target | ours µs | anchor µs | load1 | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        op = "<=" if r.metric.direction == "max" else ">="
        ratios = ", ".join(f"{x:.3f}" for x in r.ratios)
        lines.append(
            f"| {r.metric.name} | {r.ratio:.3f} | {ratios} | {op} {r.metric.target:.2f} | "
            f"{r.ours_median_us:.0f} | {r.anchor_median_us:.0f} | {r.load1:.2f} | {'pass' if r.passed else 'FAIL'} |"
        )
    return "\n".join(lines)
