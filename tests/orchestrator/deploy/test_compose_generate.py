"""``starling compose generate``: the generated testbed has the top-level file's shape, and
its five-node ring carries the experiment of ``examples/compose-quickstart.yaml``."""

from __future__ import annotations

import pytest
import yaml

from starling.node.params import ConfigError
from starling.orchestrator.config.experiment import parse_experiment
from starling.orchestrator.deploy.compose import generate, node_ids
from tests.conftest import ROOT, run_cli


def _load(text: str) -> dict:
    return yaml.safe_load(text)


def test_five_node_ring_matches_the_top_level_compose_file():
    generated = _load(generate(5, "ring"))
    shipped = _load((ROOT / "docker-compose.yml").read_text())
    nodes = [f"node-{n}" for n in "abcde"]
    assert (
        sorted(generated["services"])
        == sorted(shipped["services"])
        == sorted([*nodes, "orchestrator"])
    )
    for service in nodes:
        mine, theirs = generated["services"][service], shipped["services"][service]
        for key in ("image", "command", "volumes", "healthcheck", "networks", "build"):
            assert mine[key] == theirs[key], (service, key)
    orchestrator = generated["services"]["orchestrator"]
    assert orchestrator["depends_on"] == shipped["services"]["orchestrator"]["depends_on"]
    assert orchestrator["user"] == shipped["services"]["orchestrator"]["user"]
    assert set(generated["volumes"]) == set(shipped["volumes"])

    carried = _load(generated["configs"]["experiment"]["content"])
    example = _load((ROOT / "examples" / "compose-quickstart.yaml").read_text())
    assert carried.pop("name") == "compose-quickstart-5-ring"
    example.pop("name")
    assert carried["backend"].pop("ready_timeout") == example["backend"].pop("ready_timeout")
    assert carried == example


@pytest.mark.parametrize(("count", "kind"), [(3, "full"), (8, "star"), (30, "ring")])
def test_any_size_and_graph(count, kind):
    document = _load(generate(count, kind))
    ids = node_ids(count)
    assert len(set(ids)) == count
    assert len(document["services"]) == count + 1
    experiment = parse_experiment(_load(document["configs"]["experiment"]["content"]))
    assert experiment.node_ids == tuple(ids)
    assert dict(experiment.backend.nodes) == {n: f"node-{n}:50051" for n in ids}
    shards = [document["services"][f"node-{n}"]["command"][3] for n in ids]
    assert shards == [str(k) for k in range(count)]


@pytest.mark.e2e
def test_bad_requests_are_one_line():
    with pytest.raises(ConfigError, match="--nodes: expected a positive number"):
        generate(0)
    done = run_cli("compose", "generate", "--nodes", "3", "--topology", "moebius")
    assert done.returncode == 2
    assert done.stderr.startswith("starling: topology.kind: unknown topology 'moebius'")
