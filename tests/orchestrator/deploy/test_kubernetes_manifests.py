"""``starling deploy generate --target kubernetes``: the manifests validate against the
Kubernetes schemas (offline, kubernetes-validate), and their NetworkPolicies admit exactly
the topology's links, no more and no fewer, for a directed and a time-varying topology.

What the policies admit is computed here from the manifests alone, the way Kubernetes reads
them: the pods are the Deployments' and the Job's pod templates with their labels; a pod
selected by a policy with ``Ingress`` (``Egress``) in its types admits only what one of
those policies' rules admits; a connection from pod P to pod Q's port needs both P's egress
and Q's ingress to admit it. The pairs found are compared with the plan's links
(:func:`~starling.orchestrator.planning.plan.plan_run`: each node's out-peers over the whole
schedule), computed without the deployment code.
"""

from __future__ import annotations

import base64
import itertools
from collections.abc import Mapping
from typing import Any

import kubernetes_validate
import pytest
import yaml

from starling.node.params import ConfigError
from starling.orchestrator.config.experiment import parse_experiment
from starling.orchestrator.deploy.kubernetes import (
    generate,
    manifests,
    network_policies,
    recovery_job,
)
from starling.orchestrator.deploy.testbed import make_testbed
from starling.orchestrator.planning.plan import plan_run
from tests.conftest import ROOT

TIME_VARYING = ROOT / "tests" / "orchestrator" / "deploy" / "time_varying.yaml"
PORTS = (50051, 9464, 53)
"""The ports a pod could be reached on: gRPC, metrics, and one no pod serves."""
VERSIONS = ("1.28.0", "1.37.0")
"""An older release still common on k3s boards, and the newest schemas the package holds."""


def _time_varying() -> dict:
    return yaml.safe_load(TIME_VARYING.read_text())


def _directed() -> dict:
    """Push-sum (which takes directed graphs) on a one-way ring of five nodes a..e."""
    return {
        **_time_varying(),
        "name": "directed",
        "nodes": [{"id": node} for node in "abcde"],
        "topology": {"kind": "directed_ring"},
    }


TOPOLOGIES = {"directed ring": _directed, "time-varying directed": _time_varying}


def _plan_links(raw: Mapping[str, Any]) -> set[tuple[str, str]]:
    """The plan's links, from the experiment as the orchestrator would run it locally."""
    plan = plan_run(parse_experiment(dict(raw)))
    return {(node, peer) for node, spec in plan.specs.items() for peer in spec.out_peers()}


def _certs(tmp_path, ids) -> dict[str, bytes]:
    from starling.orchestrator.deploy.certs import init_certs

    init_certs(tmp_path / "certs", list(ids))
    return {p.name: p.read_bytes() for p in (tmp_path / "certs").iterdir()}


# --- what the policies admit --------------------------------------------------------


def _pods(objects) -> dict[str, dict[str, str]]:
    """Pod name (its workload's) -> labels, from every pod template."""
    pods = {}
    for obj in objects:
        if obj["kind"] in ("Deployment", "Job"):
            pods[obj["metadata"]["name"]] = obj["spec"]["template"]["metadata"]["labels"]
    return pods


def _matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, selector  # the generator uses matchLabels only
    wanted = selector.get("matchLabels", {})
    return all(labels.get(key) == value for key, value in wanted.items())


def _peer_admits(peer: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    # A namespaceSelector ({} = every namespace) with a podSelector picks those pods in
    # those namespaces; without a namespaceSelector, pods of the policy's own namespace.
    assert "ipBlock" not in peer, peer
    return _matches(peer.get("podSelector", {}), labels)


def _port_admits(rule: Mapping[str, Any], port: int) -> bool:
    ports = rule.get("ports")
    if not ports:
        return True
    return any(p.get("protocol", "TCP") == "TCP" and p.get("port") == port for p in ports)


def _side_admits(policies, pod_labels, other_labels, port, direction) -> bool:
    """Whether the policies selecting a pod let ``other`` in (ingress) or out (egress)."""
    kind, key, peers_key = {
        "in": ("Ingress", "ingress", "from"),
        "out": ("Egress", "egress", "to"),
    }[direction]
    selecting = [
        p
        for p in policies
        if _matches(p["spec"]["podSelector"], pod_labels)
        and kind in p["spec"].get("policyTypes", ["Ingress"])
    ]
    if not selecting:
        return True  # not isolated in this direction
    for policy in selecting:
        for rule in policy["spec"].get(key, []):
            peers = rule.get(peers_key)
            if (peers is None or any(_peer_admits(q, other_labels) for q in peers)) and (
                _port_admits(rule, port)
            ):
                return True
    return False


def admitted(objects) -> set[tuple[str, str, int]]:
    """Every (from pod, to pod, port) a connection may take under the policies."""
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"]
    pods = _pods(objects)
    allowed = set()
    for (source, s_labels), (target, t_labels) in itertools.permutations(pods.items(), 2):
        for port in PORTS:
            if _side_admits(policies, s_labels, t_labels, port, "out") and _side_admits(
                policies, t_labels, s_labels, port, "in"
            ):
                allowed.add((source, target, port))
    return allowed


def _expected(links, ids) -> set[tuple[str, str, int]]:
    nodes = {(f"node-{a}", f"node-{b}", 50051) for a, b in links}
    return nodes | {("starling-orchestrator", f"node-{n}", 50051) for n in ids}


# --- the tests ----------------------------------------------------------------------


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_network_policies_admit_exactly_the_planned_links(topology):
    raw = TOPOLOGIES[topology]()
    testbed = make_testbed(raw)
    links = _plan_links({**testbed.experiment, "backend": {"kind": "local"}})
    assert links == testbed.links()
    assert any((b, a) not in links for a, b in links), "the topology must be directed"
    found = admitted(manifests(testbed))
    assert found == _expected(links, testbed.ids)


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_a_cut_takes_out_exactly_its_link(topology):
    testbed = make_testbed(TOPOLOGIES[topology]())
    sender, receiver = sorted(testbed.links())[0]
    objects = [o for o in manifests(testbed) if o["kind"] != "NetworkPolicy"]
    cut = admitted(objects + network_policies(testbed, cut=[(sender, receiver)]))
    whole = _expected(testbed.links(), testbed.ids)
    assert cut == whole - {(f"node-{sender}", f"node-{receiver}", 50051)}


def test_the_policy_reader_sees_an_extra_rule():
    """The reader above is not blind: a policy that also admits b -> a is seen admitting it."""
    testbed = make_testbed(_directed())
    objects = manifests(testbed)
    before = admitted(objects)
    assert ("node-a", "node-b", 50051) in before
    assert ("node-b", "node-a", 50051) not in before
    extra = {
        "kind": "NetworkPolicy",
        "spec": {
            "podSelector": {"matchLabels": {"starling/node": "a"}},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"starling/node": "b"}}}]}],
        },
    }
    extra_out = {
        "kind": "NetworkPolicy",
        "spec": {
            "podSelector": {"matchLabels": {"starling/node": "b"}},
            "policyTypes": ["Egress"],
            "egress": [{}],  # everywhere
        },
    }
    after = admitted([*objects, extra, extra_out])
    assert after - before == {("node-b", "node-a", p) for p in PORTS}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("tls", [False, True], ids=["insecure", "tls"])
def test_manifests_validate_against_the_kubernetes_schemas(tmp_path, version, tls):
    testbed = make_testbed(_directed(), certs_at="/certs" if tls else None)
    certs = _certs(tmp_path, testbed.ids) if tls else None
    documents = list(yaml.safe_load_all(generate(testbed, certs)))
    kinds = sorted({d["kind"] for d in documents})
    assert kinds == sorted(
        ["ConfigMap", "Deployment", "Job", "NetworkPolicy", "PersistentVolumeClaim", "Service"]
        + (["Secret"] if tls else [])
    )
    recovery = recovery_job(testbed, "/results/directed/latest")
    for document in [*documents, recovery]:
        kubernetes_validate.validate(document, version, strict=True)
    # The recovery Job is the orchestrator to the policies (it reaches every node).
    assert admitted([*documents, recovery]) >= {
        ("starling-orchestrator-collect", f"node-{n}", 50051) for n in testbed.ids
    }
    # and the validator refuses a wrong field: its verdict above means something
    broken = next(d for d in documents if d["kind"] == "Deployment")
    broken["spec"]["replicas"] = "one"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, version, strict=True)


def test_each_pod_gets_its_own_store_name_probes_and_only_its_own_key(tmp_path):
    testbed = make_testbed(_directed(), certs_at="/certs")
    certs = _certs(tmp_path, testbed.ids)
    objects = manifests(testbed, certs)
    by_kind: dict[str, dict[str, dict]] = {}
    for obj in objects:
        by_kind.setdefault(obj["kind"], {})[obj["metadata"]["name"]] = obj
    for node in testbed.ids:
        service = by_kind["Service"][f"node-{node}"]
        assert service["spec"]["clusterIP"] == "None"  # the name is the pod's own address
        assert by_kind["PersistentVolumeClaim"][f"node-{node}-store"]
        pod = by_kind["Deployment"][f"node-{node}"]["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        health = container["readinessProbe"]["exec"]["command"]
        assert health[:4] == ["starling", "node", "health", "127.0.0.1:50051"]
        assert container["livenessProbe"]["exec"]["command"] == health
        secret = by_kind["Secret"][f"node-{node}-tls"]
        assert set(secret["data"]) == {"ca.pem", f"{node}.pem", f"{node}.key"}
        assert base64.b64decode(secret["data"][f"{node}.key"]) == certs[f"{node}.key"]
    # The CA's key goes nowhere.
    assert not any("ca.key" in s["data"] for s in by_kind["Secret"].values())
    job = by_kind["Job"]["starling-orchestrator"]["spec"]
    assert job["backoffLimit"] == 0
    mounts = job["template"]["spec"]["containers"][0]["volumeMounts"]
    assert {"name": "results", "mountPath": "/results"} in mounts


def test_a_node_id_kubernetes_cannot_name_is_refused_in_one_line():
    raw = {**_directed(), "nodes": [{"id": i} for i in ("a", "B_2", "c", "d", "e")]}
    with pytest.raises(ConfigError, match=r"node 'B_2' would be the Kubernetes Service 'node-B_2'"):
        manifests(make_testbed(raw))


@pytest.mark.parametrize("storage", ["lots", "", "0", "1 Gi", "1gi", "-1Gi", "1GiB", "Gi"])
def test_a_storage_size_no_cluster_takes_is_refused_naming_the_flag(storage):
    """The schemas take any string as a claim's size, so `--storage lots` validated and
    only the API server refused it, at kubectl apply."""
    with pytest.raises(ConfigError, match=r"^--storage: expected a size like 1Gi"):
        manifests(make_testbed(_directed()), storage=storage)


@pytest.mark.parametrize("storage", ["1Gi", "500Mi", "10G", "1.5Ti", "2e9", "+3Ki", ".5Gi"])
def test_the_sizes_kubernetes_takes_pass(storage):
    objects = manifests(make_testbed(_directed()), storage=storage)
    claims = [o for o in objects if o["kind"] == "PersistentVolumeClaim"]
    assert {o["spec"]["resources"]["requests"]["storage"] for o in claims} == {storage}
