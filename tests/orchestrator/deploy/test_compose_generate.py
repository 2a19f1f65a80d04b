"""``starling deploy generate --target compose`` (and its old name ``compose generate``): the
generated testbed has the top-level file's shape, builds each image once, and its five-node
ring carries the experiment of ``examples/compose-quickstart.yaml``."""

from __future__ import annotations

import pytest
import yaml

from starling.node.params import ConfigError
from starling.orchestrator.config.experiment import parse_experiment
from starling.orchestrator.config.shipped import experiment_file
from starling.orchestrator.config.yaml_files import read_yaml_file
from starling.orchestrator.deploy.compose import generate
from starling.orchestrator.deploy.testbed import make_testbed, node_ids
from tests.conftest import ROOT, run_cli


def _load(text: str) -> dict:
    return yaml.safe_load(text)


def _compose(count: int | None = None, kind: str | None = None) -> dict:
    base = read_yaml_file(experiment_file("compose-quickstart"))
    return _load(generate(make_testbed(base, count, kind)))


def test_five_node_ring_matches_the_top_level_compose_file():
    generated = _compose(5, "ring")
    shipped = _load((ROOT / "docker-compose.yml").read_text())
    nodes = [f"node-{n}" for n in "abcde"]
    assert (
        sorted(generated["services"])
        == sorted(shipped["services"])
        == sorted([*nodes, "orchestrator"])
    )
    for service in nodes:
        mine, theirs = generated["services"][service], shipped["services"][service]
        for key in ("image", "command", "volumes", "healthcheck", "networks"):
            assert mine[key] == theirs[key], (service, key)
        assert mine.get("build") == theirs.get("build"), service
    orchestrator = generated["services"]["orchestrator"]
    assert orchestrator["depends_on"] == shipped["services"]["orchestrator"]["depends_on"]
    assert orchestrator["user"] == shipped["services"]["orchestrator"]["user"]
    assert orchestrator["build"] == shipped["services"]["orchestrator"]["build"]
    assert set(generated["volumes"]) == set(shipped["volumes"])

    carried = _load(generated["configs"]["experiment"]["content"])
    example = _load((ROOT / "examples" / "compose-quickstart.yaml").read_text())
    assert carried.pop("name") == "compose-quickstart-5-ring"
    example.pop("name")
    assert carried["backend"].pop("ready_timeout") == example["backend"].pop("ready_timeout")
    assert carried == example


@pytest.mark.parametrize("document", ["generated", "shipped"])
def test_each_image_is_built_by_one_service(document):
    """Five node services used to build the same image five times: now one builds it and
    the others run it, and the orchestrator's service builds its own."""
    found = (
        _compose(5, "ring")
        if document == "generated"
        else _load((ROOT / "docker-compose.yml").read_text())
    )
    builders: dict[str, list[str]] = {}
    for name, service in found["services"].items():
        if "build" in service:
            builders.setdefault(service["image"], []).append(name)
    assert builders == {
        "starling-node:latest": ["node-a"],
        "starling-orchestrator:latest": ["orchestrator"],
    }


@pytest.mark.parametrize(("count", "kind"), [(3, "full"), (8, "star"), (30, "ring")])
def test_any_size_and_graph(count, kind):
    document = _compose(count, kind)
    ids = node_ids(count)
    assert len(set(ids)) == count
    assert len(document["services"]) == count + 1
    experiment = parse_experiment(_load(document["configs"]["experiment"]["content"]))
    assert experiment.node_ids == tuple(ids)
    assert dict(experiment.backend.nodes) == {n: f"node-{n}:50051" for n in ids}
    shards = [document["services"][f"node-{n}"]["command"][3] for n in ids]
    assert shards == [str(k) for k in range(count)]


def test_an_experiment_keeps_its_own_nodes_and_graph_unless_told():
    """Without --nodes and --topology the experiment's nodes and graph are kept (here a
    time-varying directed graph over four nodes named by the topology's count)."""
    base = _load((ROOT / "tests" / "orchestrator" / "deploy" / "time_varying.yaml").read_text())
    testbed = make_testbed(base)
    assert testbed.ids == ("0", "1", "2", "3")
    assert testbed.experiment["topology"] == base["topology"]
    assert testbed.links() == {("0", "1"), ("2", "3"), ("1", "2"), ("3", "0")}


@pytest.mark.e2e
def test_bad_requests_are_one_line():
    base = read_yaml_file(experiment_file("compose-quickstart"))
    with pytest.raises(ConfigError, match="--nodes: expected a positive number"):
        make_testbed(base, 0)
    for words in (["compose", "generate"], ["deploy", "generate", "--target", "swarm"]):
        done = run_cli(*words, "--nodes", "3", "--topology", "moebius")
        assert done.returncode == 2
        assert done.stderr.startswith("starling: --topology: unknown topology 'moebius'")
