"""Run every benchmark and print a table of ratios (ours / raw library anchor, same run).

Usage: ``.venv/bin/python benchmarks/run.py`` (full: 3 repeats x 40 rounds, writes benchmarks/RESULTS.md)
       ``.venv/bin/python benchmarks/run.py --quick`` (smoke: 1 repeat x 5 rounds, writes nothing)
       ``.venv/bin/python benchmarks/run.py --only TEXT`` (full rounds, only rows whose name holds TEXT, writes nothing)
       ``--results FILE`` writes the table of a full run to FILE instead (e.g. a run on a loaded machine)
       ``--modules bench_a,bench_b`` runs only those modules (writes only with ``--results FILE``)
Not part of the test suite.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import Result, format_table, machine_description, run_metric  # noqa: E402

MODULES = [
    "bench_chain",
    "bench_agent",
    "bench_deep",
    "bench_gateway",
    "bench_stream",
    "bench_http",
    "bench_mcp",
    "bench_storage",
    "bench_classify",
    "bench_tool_caller",
    "bench_rag",
    "bench_memory",
    "bench_recall",
    "bench_routing",
    "bench_modalities",
    "bench_sessions",
    "bench_langgraph",
    "bench_governance",
    "bench_loops",
    "bench_providers",
]


def _run_module(module_name: str, *, only: str | None, rounds: int, repeats: int) -> list[Result]:
    """Every metric of one module, in this process."""
    results: list[Result] = []
    module = importlib.import_module(module_name)
    for metric in module.metrics():
        if only and only not in metric.name:
            continue
        print(f"running {metric.name} ...", file=sys.stderr, flush=True)
        results.append(run_metric(metric, rounds=rounds, repeats=repeats))
    return results


def _run_isolated(module_name: str, argv: list[str]) -> list[Result] | None:
    """One module in a fresh interpreter, so the stacks, heap and servers of earlier modules cannot skew it."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "results.pickle"
        done = subprocess.run([sys.executable, __file__, "--module", module_name, "--out", str(out), *argv])
        if done.returncode not in (0, 1) or not out.exists():
            # One crashed module must not cost the rows of the others (a full run takes an hour): it is
            # named under the table and makes the run fail.
            print(f"benchmark module {module_name} crashed (exit {done.returncode})", file=sys.stderr)
            return None
        results: list[Result] = pickle.loads(out.read_bytes())
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 repeat of 5 rounds, no RESULTS.md")
    parser.add_argument("--only", default=None, help="run only metrics whose name contains this text")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--results", default=str(HERE / "RESULTS.md"), help="where a full run writes its table")
    parser.add_argument("--modules", default=None, help="comma-separated bench_* modules to run (default: all)")
    # Internal: run one module and pickle its results to --out.
    parser.add_argument("--module", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    rounds, repeats = (5, 1) if args.quick else (max(args.rounds, 40), 3)

    if args.module is not None:
        results = _run_module(args.module, only=args.only, rounds=rounds, repeats=repeats)
        for result in results:  # metrics hold closures; the parent needs only their description
            result.metric = dataclasses.replace(
                result.metric, ours=None, anchor=None, ours_setup=None, anchor_setup=None, measure=None
            )
        Path(args.out).write_bytes(pickle.dumps(results))
        return 0 if all(r.passed for r in results) else 1

    passed_on = list(argv if argv is not None else sys.argv[1:])
    for option in ("--results", "--modules"):  # the parent's options only
        if option in passed_on:
            at = passed_on.index(option)
            del passed_on[at : at + 2]
    chosen = MODULES if args.modules is None else [m.strip() for m in args.modules.split(",")]
    if unknown := sorted(set(chosen) - set(MODULES)):
        parser.error(f"unknown --modules {unknown}; choose from {MODULES}")
    results = []
    crashed: list[str] = []
    for module_name in chosen:
        got = _run_isolated(module_name, passed_on)
        if got is None:
            crashed.append(module_name)
        else:
            results.extend(got)
    table = format_table(results)
    if crashed:
        table += f"\n\n**Crashed (no rows): {', '.join(crashed)}**"
    print(table)
    # A partial table must never replace the full run's (a chosen subset goes to --results only when given).
    if not args.quick and not args.only and (args.modules is None or args.results != str(HERE / "RESULTS.md")):
        notes = "\n".join(f"- **{r.metric.name}**: {r.metric.note}" for r in results if r.metric.note)
        Path(args.results).write_text(
            "# Benchmark results\n\n"
            "Generated by `.venv/bin/python benchmarks/run.py`. Ratios are ours / anchor, medians of "
            f"{rounds} interleaved shuffled rounds per repeat, {repeats} repeats; a metric fails only when it "
            "misses its target in 2 of 3 repeats. Each benchmark module runs in a fresh process (ours and its "
            "anchor always in the same one). Absolute times are not comparable across runs.\n\n"
            f"Machine: {machine_description()}\n\n{table}\n\n{notes}\n"
        )
    return 0 if all(r.passed for r in results) and not crashed else 1


if __name__ == "__main__":
    raise SystemExit(main())
