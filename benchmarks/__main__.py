"""``python -m benchmarks [--quick]``: Starling beside raw grpcio, one table, results.json.

Every communication figure of Starling is measured in the same run as the raw grpcio ring
(:mod:`benchmarks.raw_ring`) doing the same communication, and reported as a ratio, so the
table means something on a loaded machine. Round rates are marginal: two run lengths, and
(rounds₂ − rounds₁) / (loop₂ − loop₁), where a loop is timed from Start to every node done
(start-up, configuration and evaluation are timed apart, see
:mod:`benchmarks.starling_ring`). ``--quick`` (``make bench QUICK=1``) uses shorter runs
and skips the 100-node ring, the two 20-node [000] studies and the doors' flood
(:mod:`benchmarks.doors`, also run alone); it is meant to finish in under two minutes.
Timings are never asserted anywhere: this prints and records.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import starling.node  # noqa: F401 - one BLAS thread per process, as in starling (node/__init__.py)

RESULTS = Path(__file__).with_name("results.json")
STUDIES = ["admm-fig1-n5", "admm-fig2-n5", "admm-fig1-n20", "admm-fig2-n20"]
QUICK_STUDIES = STUDIES[:2]
EVALUATED_LONG_CHAINS = 250
EVALUATED_LONG_ROUNDS = {True: 80, False: 160}
"""The longer evaluated run at dim 1000 (quick or not): the W2 curve scores a round per
doubling, so evaluation's share of a run falls as the run grows; 250 chains keep its
samples under 2 GB at 160 rounds."""


def _say(message: str) -> None:
    print(f"  [{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _marginal(rounds: tuple[int, int], seconds: tuple[float, float]) -> float:
    """Rounds per second of the loop alone: the difference of two run lengths."""
    extra = seconds[1] - seconds[0]
    return (rounds[1] - rounds[0]) / extra if extra > 0 else float("nan")


def _per_node_round(runs: list[dict], extra_node_rounds: int) -> dict:
    """Marginal CPU (ms) and context switches (voluntary, involuntary) per node and round,
    from the two run lengths' ``cpu_s`` and ``switches``."""
    return {
        "cpu_ms": 1e3 * (runs[1]["cpu_s"] - runs[0]["cpu_s"]) / extra_node_rounds,
        "switches": [
            (runs[1]["switches"][k] - runs[0]["switches"][k]) / extra_node_rounds for k in (0, 1)
        ],
    }


def ring_rate(quick: bool) -> dict:
    """5-node ring, dim 2, one chain (16-byte iterates): marginal rounds per second with the
    defaults (a resume point every round, a durable checkpoint every 1000 rounds or second);
    also with ``checkpoint_every: 1``, a durable checkpoint (3 fsyncs) every round."""
    from benchmarks.in_process import sampler_ms, storage_ms
    from benchmarks.raw_aio_ring import aio_ring_stats
    from benchmarks.raw_ring import ring_stats
    from benchmarks.starling_ring import ring_experiment, starling_ring

    lengths = (30, 130) if quick else (100, 500)
    starling, every, raw, aio = [], [], [], []
    for rounds in lengths:
        _say(
            f"ring rate: {rounds} rounds, Starling (defaults, checkpoint_every 1), raw grpcio"
            " (threads, then grpc.aio)"
        )
        starling.append(starling_ring(ring_experiment(5, rounds, chains=1, dim=2)))
        every.append(starling_ring(ring_experiment(5, rounds, chains=1, dim=2, checkpoint_every=1)))
        raw.append(ring_stats(5, rounds, 16))
        aio.append(aio_ring_stats(5, rounds, 16))
    extra_node_rounds = 5 * (lengths[1] - lengths[0])
    _say("ring rate: the same rounds in-process (simulate), for the samplers' own CPU")
    in_process = sampler_ms(ring_experiment(5, lengths[1], chains=1, dim=2))
    storage = storage_ms(1, 2, rounds=1000)
    starling_costs = _per_node_round(starling, extra_node_rounds)
    raw_costs = _per_node_round(raw, extra_node_rounds)
    return {
        # CPU per node and round, marginal like the rates: what the machine's load does not
        # change much, unlike the rates (a busy machine slows both sides, unequally).
        "starling_cpu_ms": starling_costs["cpu_ms"],
        "raw_cpu_ms": raw_costs["cpu_ms"],
        "in_process_cpu_ms": in_process,
        "storage_cpu_ms": storage,
        "starling_switches": starling_costs["switches"],
        "raw_switches": raw_costs["switches"],
        "starling_durable_every_round": _marginal(lengths, tuple(r["loop_s"] for r in every)),
        "rounds": list(lengths),
        "starling_loop_s": [r["loop_s"] for r in starling],
        "raw_loop_s": [r["seconds"] for r in raw],
        "starling": _marginal(lengths, tuple(r["loop_s"] for r in starling)),
        "raw": _marginal(lengths, tuple(r["seconds"] for r in raw)),
        "raw_aio": _marginal(lengths, tuple(r["seconds"] for r in aio)),
        "raw_aio_cpu_ms": _per_node_round(aio, extra_node_rounds)["cpu_ms"],
        "startup5_starling_s": starling[0]["startup_s"],
        "startup5_raw_s": raw[0]["startup_s"],
    }


def large_iterates(quick: bool) -> dict:
    """5-node ring of D-SGLD (a cheap step, so the wire dominates) with chains × dim 1000
    float64 iterates: MB/s of iterate payload each node sends, marginal over two lengths,
    default checkpoints; and the orchestrator's evaluation of the shorter run's samples at
    dim 1000."""
    from benchmarks.in_process import sampler_ms, storage_ms
    from benchmarks.raw_ring import ring_stats
    from benchmarks.starling_ring import ring_experiment, starling_ring

    chains, dim = (250, 1000) if quick else (1000, 1000)
    lengths = (5, 20) if quick else (10, 40)
    payload = chains * dim * 8
    starling, raw = [], []
    for index, rounds in enumerate(lengths):
        _say(f"large iterates: {chains}x{dim}, {rounds} rounds, Starling then raw grpcio")
        experiment = ring_experiment(
            5, rounds, chains, dim, algorithm="d-sgld", hyperparameters={"eta": 1e-4}
        )
        # The longer run is evaluated: the W2 curve's schedule scores a round per doubling
        # (evaluation.w2_schedule), so the share of evaluation falls as a run grows.
        starling.append(starling_ring(experiment, evaluate=index == 1))
        raw.append(ring_stats(5, rounds, payload))
    sent_mb = 2 * payload / 1e6  # per node per round: one payload to each neighbour
    extra_node_rounds = 5 * (lengths[1] - lengths[0])
    _say("large iterates: the same rounds in-process (simulate), for the sampler's own CPU")
    in_process = sampler_ms(
        ring_experiment(
            5, lengths[1], chains, dim, algorithm="d-sgld", hyperparameters={"eta": 1e-4}
        )
    )
    _say("large iterates: storing each sample and resume point alone, for their CPU")
    storage = storage_ms(chains, dim, rounds=lengths[1])
    long_rounds = EVALUATED_LONG_ROUNDS[quick]
    _say(f"evaluation: {EVALUATED_LONG_CHAINS}x{dim}, {long_rounds} rounds, Starling alone")
    longer = starling_ring(
        ring_experiment(
            5,
            long_rounds,
            EVALUATED_LONG_CHAINS,
            dim,
            algorithm="d-sgld",
            hyperparameters={"eta": 1e-4},
        ),
        evaluate=True,
    )
    return {
        "in_process_cpu_ms": in_process,
        "storage_cpu_ms": storage,
        "chains": chains,
        "dim": dim,
        "payload_mb": payload / 1e6,
        "rounds": list(lengths),
        "starling_loop_s": [r["loop_s"] for r in starling],
        "raw_loop_s": [r["seconds"] for r in raw],
        "starling": sent_mb * _marginal(lengths, tuple(r["loop_s"] for r in starling)),
        "raw": sent_mb * _marginal(lengths, tuple(r["seconds"] for r in raw)),
        "starling_cpu_ms": _per_node_round(starling, extra_node_rounds)["cpu_ms"],
        "raw_cpu_ms": _per_node_round(raw, extra_node_rounds)["cpu_ms"],
        "evaluated": [
            _evaluated(starling[1], chains, lengths[1]),
            _evaluated(longer, EVALUATED_LONG_CHAINS, long_rounds),
        ],
    }


def _evaluated(run: dict, chains: int, rounds: int) -> dict:
    """An evaluated run's figures (:func:`benchmarks.evaluation_parts.timed_evaluation`)
    with its shape and its loop's seconds."""
    keys = ("evaluate_s", "evaluate_scored", "evaluate_parts", "one_set_ms", "loop_s")
    return {"chains": chains, "rounds": rounds, **{key: run[key] for key in keys}}


def quickstart_rss() -> dict:
    """Peak RSS of one node process running the quickstart (5-node ring, 100 chains, dim 2,
    100 rounds), beside a raw grpcio ring node's."""
    from benchmarks.raw_ring import ring_stats
    from benchmarks.starling_ring import ring_experiment, starling_ring

    _say("node RSS: the quickstart on 5 nodes, then a raw grpcio ring of 5")
    starling = starling_ring(ring_experiment(5, 100, chains=100, dim=2))
    raw = ring_stats(5, 100, 100 * 2 * 8)
    return {
        "starling": starling["peak_rss_mb_max"],
        "raw": raw["peak_rss_mb"],
        "starling_anon": starling["anon_rss_mb_max"],
        "raw_anon": raw["anon_rss_mb"],
        "quickstart_loop_s": starling["loop_s"],
    }


def one_node_start(launches: int = 3) -> dict:
    """One node's start-up, launched alone (the best of ``launches``), beside one raw
    grpcio server's."""
    from benchmarks.raw_ring import start_time
    from benchmarks.starling_ring import node_ready_seconds

    _say(f"start-up of one node, {launches} launches each: Starling then raw grpcio")
    return {
        "starling": min(node_ready_seconds() for _ in range(launches)),
        "raw": min(start_time(1) for _ in range(launches)),
    }


def big_ring(nodes: int, rounds: int) -> dict:
    """An ``nodes``-node ring (dim 2, one chain): start-up, rounds per second, RSS in all."""
    from benchmarks.raw_ring import ring_stats
    from benchmarks.starling_ring import ring_experiment, starling_ring

    _say(f"{nodes}-node ring, {rounds} rounds: Starling then raw grpcio")
    starling = starling_ring(ring_experiment(nodes, rounds, chains=1, dim=2))
    raw = ring_stats(nodes, rounds, 16)
    return {
        "nodes": nodes,
        "rounds": rounds,
        "startup_starling_s": starling["startup_s"],
        "startup_raw_s": raw["startup_s"],
        "starling": rounds / starling["loop_s"],
        "raw": rounds / raw["seconds"],
        "rss_sum_mb": starling["peak_rss_mb_sum"],
    }


def studies(names: list[str]) -> dict:
    """``starling simulate`` of [000] studies (one seed each), in-process; how much of it is
    evaluation and how much drawing the plots."""
    import tempfile

    from benchmarks.evaluation_parts import timed_calls
    from starling.orchestrator.config.study import load_study
    from starling.orchestrator.config.yaml_files import read_yaml_file
    from starling.orchestrator.execution import study
    from starling.orchestrator.planning.plan import plan_study
    from starling.orchestrator.results import write as results

    spent = {"evaluate_s": 0.0, "plot_s": 0.0}
    # Instrumentation only: the same functions, timed.
    timed = [
        (results, "evaluate", "evaluate_s"),
        (study, "plot_curves", "plot_s"),
        (study, "plot_against_x", "plot_s"),
    ]
    out: dict = {"studies": {}}
    examples = Path(__file__).resolve().parent.parent / "examples"
    with timed_calls(timed, spent):
        for name in names:
            _say(f"simulate {name}")
            raw = read_yaml_file(examples / f"{name}.yaml")
            # One seed: the 15 runs per study that issue 15's goal was set for (the files
            # now ask for 10 seeds, 150 runs each: the same work ten times over).
            raw["seeds"] = 1
            loaded = plan_study(load_study(raw))
            with tempfile.TemporaryDirectory(prefix="starling-bench-") as tmp:
                began = time.perf_counter()
                study.run_study(loaded, Path(tmp), "simulate", say=lambda _m: None)
                out["studies"][name] = time.perf_counter() - began
    out["total_s"] = sum(out["studies"].values())
    out.update(spent)
    return out


def _switch_pair(switches: list[float]) -> str:
    return f"{switches[0]:.0f} + {switches[1]:.0f}"


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b and a == a and b == b else "-"


def _pair(what: str, starling: float, raw: float, form: str, goal: str = "-") -> tuple:
    """A row of a Starling figure beside raw grpcio's (``form`` formats both) and their
    ratio."""
    return (what, form.format(starling), form.format(raw), _ratio(starling, raw), goal)


def _cpu_rows(figures: dict, form: str) -> list[tuple]:
    """CPU per node and round beside raw grpcio's, split into the samplers' own rounds
    (in-process) and what the network and the disk cost beyond them.

    The last row is the best ratio a node could reach on this machine: the ring is
    CPU-bound (N nodes on fewer cores), so a node's round costs at least the sampler's own
    CPU, plus keeping its sample (the store and resume point, timed alone), plus the raw
    ring's CPU for the same messages; the ratio of the rates is then at most
    ``raw / (raw + own + storing)``. A goal above that ceiling is out of reach whatever
    the node's transport does."""
    own, total, raw = (figures[k] for k in ("in_process_cpu_ms", "starling_cpu_ms", "raw_cpu_ms"))
    keep = figures.get("storage_cpu_ms", 0.0)
    return [
        _pair("  CPU per node and round (all threads, marginal)", total, raw, form),
        (
            "    of which the sampler's own rounds (simulate, in-process)",
            form.format(own),
            "-",
            "-",
            "-",
        ),
        _pair("    beyond them: the network and the disk", total - own, raw, form),
        (
            "    storing each sample and resume point, alone (no network)",
            form.format(keep),
            "-",
            "-",
            "-",
        ),
        (
            "    ceiling of the ratio, CPU-bound: raw / (raw + sampler's own + storing)",
            "-",
            "-",
            _ratio(raw, raw + own + keep),
            "-",
        ),
    ]


def _evaluation_rows(li: dict) -> list[tuple]:
    """Each evaluated run at dim 1000: its evaluation against its loop, the parts, and
    one scored set alone against the sampler's own node-round (the curve's unit of cost,
    :mod:`benchmarks.evaluation_parts`)."""
    from benchmarks.evaluation_parts import BESIDE, PARTS

    rows = []
    for run in li["evaluated"]:
        rows.append(
            (
                f"evaluation at dim {li['dim']}, {run['chains']} chains, {run['rounds']} "
                f"rounds ({run['evaluate_scored']} scored), 5 nodes",
                f"{run['evaluate_s']:.2f} s",
                "-",
                f"{run['evaluate_s'] / run['loop_s']:.2f}x its run's loop",
                "<= 25% of a run",
            )
        )
        parts = run["evaluate_parts"]
        for key, what in [*PARTS.items(), ("rest", "the rest"), *BESIDE.items()]:
            rows.append((f"  of which {what}", f"{parts[key]:.2f} s", "-", "-", "-"))
    first = li["evaluated"][0]
    if first["chains"] == li["chains"]:
        rows.append(
            (
                f"  one W2 of one node's round alone ({first['chains']} points), against "
                "the sampler's own node-round",
                f"{first['one_set_ms']:.1f} ms",
                f"{li['in_process_cpu_ms']:.1f} ms",
                _ratio(first["one_set_ms"], li["in_process_cpu_ms"]),
                "-",
            )
        )
    return rows


def table(report: dict) -> str:
    """The one table: what, Starling, raw grpcio, ratio, the goal (issue 32's where it set
    one: the rings, large iterates, node RSS and evaluation at dim 1000)."""
    r = report["ring_rate"]
    rows = [
        _pair(
            "5-node ring, dim 2, 1 chain: marginal rounds/s (default checkpoints)",
            r["starling"],
            r["raw"],
            "{:.0f} r/s",
            ">= 0.7x",
        ),
        *_cpu_rows(r, "{:.2f} ms"),
        (
            "  context switches per node and round (voluntary + involuntary)",
            _switch_pair(r["starling_switches"]),
            _switch_pair(r["raw_switches"]),
            _ratio(sum(r["starling_switches"]), sum(r["raw_switches"])),
            "-",
        ),
        _pair(
            "  reference: the raw ring on grpc.aio (one event loop a process)",
            r["starling"],
            r["raw_aio"],
            "{:.0f} r/s",
        ),
        _pair(
            "    its CPU per node and round", r["starling_cpu_ms"], r["raw_aio_cpu_ms"], "{:.2f} ms"
        ),
        _pair(
            "  the same, checkpoint_every: 1 (3 fsyncs every round)",
            r["starling_durable_every_round"],
            r["raw"],
            "{:.0f} r/s",
        ),
    ]
    li = report["large_iterates"]
    rows.append(
        _pair(
            f"5-node ring, {li['chains']} chains x dim {li['dim']} "
            f"({li['payload_mb']:.0f} MB iterates): MB/s sent per node",
            li["starling"],
            li["raw"],
            "{:.0f} MB/s",
            ">= 0.5x",
        )
    )
    rows += _cpu_rows(li, "{:.1f} ms")
    one = report["one_node_start"]
    rows.append(
        _pair(
            "start-up, one node (launched to serving; best of 3)",
            one["starling"],
            one["raw"],
            "{:.2f} s",
            "<= 0.5 s",
        )
    )
    rows.append(
        _pair(
            "start-up, 5 nodes (processes launched to all serving)",
            r["startup5_starling_s"],
            r["startup5_raw_s"],
            "{:.2f} s",
        )
    )
    for ring in report.get("big_rings", []):
        n = ring["nodes"]
        goal = {20: "<= 10 s", 100: "<= 30 s"}.get(n, "-")
        rows.append(
            _pair(
                f"start-up, {n} nodes",
                ring["startup_starling_s"],
                ring["startup_raw_s"],
                "{:.2f} s",
                goal,
            )
        )
        rows.append(
            _pair(
                f"{n}-node ring, {ring['rounds']} rounds: rounds/s",
                ring["starling"],
                ring["raw"],
                "{:.1f} r/s",
                ">= 0.8x" if n == 100 else "-",
            )
        )
        rows.append(
            (f"{n}-node ring: peak RSS of all nodes", f"{ring['rss_sum_mb']:.0f} MB", "-", "-", "-")
        )
    q = report["rss"]
    rows.append(
        _pair(
            "one node process, peak RSS (quickstart model)",
            q["starling"],
            q["raw"],
            "{:.0f} MB",
            "<= 64 MB",
        )
    )
    rows.append(
        _pair(
            "  of which its own (RssAnon: no shared-library pages)",
            q["starling_anon"],
            q["raw_anon"],
            "{:.0f} MB",
        )
    )
    s = report["simulate"]
    names = ", ".join(s["studies"])
    rows.append(
        (
            f"simulate [000] studies, one seed each ({names})",
            f"{s['total_s']:.1f} s",
            "-",
            "-",
            "<= 15 s (all four)",
        )
    )
    rows.append(
        (
            "  of which evaluation",
            f"{s['evaluate_s']:.1f} s",
            "-",
            f"{s['evaluate_s'] / s['total_s']:.0%} of it",
            "<= 25%",
        )
    )
    if "plot_s" in s:
        rows.append(
            (
                "  of which drawing the plots",
                f"{s['plot_s']:.1f} s",
                "-",
                f"{s['plot_s'] / s['total_s']:.0%} of it",
                "-",
            )
        )
    rows += _evaluation_rows(li)
    header = ("what", "Starling", "raw grpcio", "ratio", "goal")
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(5)]
    lines = [" | ".join(str(c).ljust(w) for c, w in zip(header, widths, strict=True))]
    lines.append("-|-".join("-" * w for w in widths))
    for row in rows:
        lines.append(" | ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="the short suite (< 2 min)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where results.json goes")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    load = os.getloadavg()
    report: dict = {
        "quick": args.quick,
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "load_average_at_start": [round(x, 2) for x in load],
        },
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    report["ring_rate"] = ring_rate(args.quick)
    report["large_iterates"] = large_iterates(args.quick)
    report["one_node_start"] = one_node_start()
    report["rss"] = quickstart_rss()
    report["big_rings"] = [big_ring(20, 50 if args.quick else 200)]
    if not args.quick:
        report["big_rings"].append(big_ring(100, 200))
    report["simulate"] = studies(QUICK_STUDIES if args.quick else STUDIES)
    if not args.quick:
        from benchmarks.doors import doors

        _say("doors: a node under 1000 idle calls of each kind, and 8 messages of 300 MB")
        report["doors"] = doors()
    report["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    report["total_s"] = time.perf_counter() - began
    text = table(report)
    if "doors" in report:
        from benchmarks.doors import table as doors_table

        text += "\n\n" + "\n".join(doors_table(scenario) for scenario in report["doors"])
    report["table"] = text
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    m = report["machine"]
    print(
        f"Starling beside raw grpcio ({'quick' if args.quick else 'full'} suite): "
        f"{m['cpus']} CPUs, load {m['load_average_at_start'][0]:.1f} -> "
        f"{m['load_average_at_end'][0]:.1f}, {report['total_s']:.0f} s"
    )
    print(text)
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
