"""The shipped link-failure study, simulated (``starling simulate``, every node in one process;
``starling run`` gives bit-identical samples, see tests/test_faults_e2e.py): its table, its
plot, its findings."""

from __future__ import annotations

import csv

import pytest

from tests.conftest import ROOT, run_cli

STUDY = ROOT / "examples" / "link-failure-study.yaml"
VARIANTS = ["D-SGLD", "D-ULA", "D-ADMMS", "D-ADMMS-literal", "push-sum", "push-sum-RS"]
PS = [0.0, 0.1, 0.3, 0.5]

# The whole study (24 runs), through the real command line in a fresh interpreter.
pytestmark = [pytest.mark.slow, pytest.mark.e2e]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    out = tmp_path_factory.mktemp("link-failure")
    home = tmp_path_factory.mktemp("home")
    done = run_cli("simulate", str(STUDY), "--out", str(out), env_home=home, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "Warning" not in done.stderr
    with open(out / "table.csv") as handle:
        rows = {(r["cell"], r["variant"]): r for r in csv.DictReader(handle)}
    return out, rows


def _value(row: dict, key: str) -> float | None:
    return float(row[key]) if row[key] not in ("", "None") else None


def test_the_table_has_every_algorithm_against_every_p_and_a_plot(study):
    out, rows = study
    assert len(rows) == len(VARIANTS) * len(PS)
    table = (out / "table.md").read_text()
    assert "| variant | p = 0 | p = 0.1 | p = 0.3 | p = 0.5 |" in table
    for variant in VARIANTS:
        assert f"\n| {variant} | " in table
    assert (out / "summary.png").stat().st_size > 10_000
    assert sorted(p.name for p in out.glob("w2-*.png")) == [
        "w2-p-0.1.png",
        "w2-p-0.3.png",
        "w2-p-0.5.png",
        "w2-p-0.png",
    ]


def test_the_measured_loss_is_the_scheduled_probability(study):
    _, rows = study
    for p in PS:
        for variant in ("D-SGLD", "push-sum-RS"):
            lost = _value(rows[(f"p={p:g}", variant)], "lost_fraction")
            # 300 rounds × 10 one-way links: the share is within a few points of p.
            assert lost == pytest.approx(p, abs=0.03), (variant, p, lost)


def test_findings(study):
    _, rows = study
    cell = lambda p, v: rows[(f"p={p:g}", v)]  # noqa: E731
    # Without losses running sums are plain push-sum (up to the rounding of differences).
    assert _value(cell(0, "push-sum-RS"), "w2_average") == pytest.approx(
        _value(cell(0, "push-sum"), "w2_average"), rel=1e-6
    )
    # Plain push-sum loses mass with every lost message and diverges; running sums do not.
    for p in PS[1:]:
        assert cell(p, "push-sum")["diverged"] not in ("", "None"), p
        assert _value(cell(p, "push-sum-RS"), "w2_average") is not None, p
    assert _value(cell(0.1, "push-sum-RS"), "w2_average") < 1.5 * _value(
        cell(0, "push-sum-RS"), "w2_average"
    )
    # D-ADMMS holding its isolated rounds keeps its fault-free accuracy; read literally, it
    # is thrown off by them once they are common (p = 0.3: a node hears nobody in 9 % of
    # rounds).
    held = [_value(cell(p, "D-ADMMS"), "w2_average") for p in PS]
    assert max(held) < 1.25 * held[0], held
    assert _value(cell(0, "D-ADMMS-literal"), "w2_average") == held[0]
    assert _value(cell(0.3, "D-ADMMS-literal"), "w2_average") > 3 * held[0]
    # Gossip samplers keep the average on target; their nodes drift apart as p grows.
    for variant in ("D-SGLD", "D-ULA"):
        errors = [_value(cell(p, variant), "consensus_error") for p in PS]
        assert errors == sorted(errors), (variant, errors)
        averages = [_value(cell(p, variant), "w2_average") for p in PS]
        assert max(averages) < 1.2 * min(averages), (variant, averages)
