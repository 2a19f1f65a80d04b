"""``starling deploy generate|policies``: what each target writes where, and every mistake
one line naming the option, exit 2, nothing of the user's replaced unasked. In-process
through ``main``; ``starling certs init`` makes real certificates for ``--tls``."""

from __future__ import annotations

import yaml

from starling.orchestrator.cli.main import main


def _refused(capsys, argv: list[str], *needles: str) -> None:
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("starling: ") and err.count("\n") == 1, err
    for needle in needles:
        assert needle in err, err


def _certs(tmp_path, capsys) -> str:
    folder = tmp_path / "certs"
    hosts = [arg for n in "abcde" for arg in ("--host", f"{n}=node-{n}")]
    assert main(["certs", "init", str(folder), "--nodes", "a,b,c,d,e", *hosts]) == 0
    capsys.readouterr()
    return str(folder)


def test_swarm_writes_a_folder_whose_secrets_name_the_certificate_files(tmp_path, capsys):
    certs = _certs(tmp_path, capsys)
    out = tmp_path / "stack"
    assert main(["deploy", "generate", "--target", "swarm", "--tls", certs, "--out", str(out)]) == 0
    stack = yaml.safe_load((out / "stack.yml").read_text())
    experiment = yaml.safe_load((out / "experiment.yaml").read_text())
    assert experiment["backend"]["tls"]["key"] == "/run/secrets/orchestrator.key"
    secrets = stack["secrets"]
    assert secrets["a.key"] == {"file": str((tmp_path / "certs" / "a.key").resolve())}
    assert "ca.key" not in secrets  # the CA's key is handed to nobody
    for node in "abcde":
        service = stack["services"][f"node-{node}"]
        assert service["deploy"]["endpoint_mode"] == "dnsrr"
        assert {s["source"] for s in service["secrets"]} == {"ca.pem", f"{node}.pem", f"{node}.key"}
    # The same again is refused, then allowed with --overwrite.
    again = ["deploy", "generate", "--target", "swarm", "--out", str(out)]
    _refused(capsys, again, "--out", "already exists")
    assert main([*again, "--overwrite"]) == 0


def test_mistakes_are_one_line(tmp_path, capsys):
    _refused(capsys, ["deploy", "generate", "--target", "swarm"], "--out", "folder")
    _refused(
        capsys,
        ["deploy", "generate", "--target", "kubernetes", "--tls", str(tmp_path)],
        "--tls",
        "lacks ca.pem",
    )
    _refused(capsys, ["deploy", "generate", "--tls", str(tmp_path)], "--tls", "compose.tls.yml")
    _refused(
        capsys,
        ["deploy", "generate", "--target", "swarm", "--collect", "/results/x", "--out", "o"],
        "--collect",
    )
    _refused(capsys, ["deploy", "policies", "--cut", "a:c"], "--cut", "'a:c'")
    _refused(capsys, ["deploy", "policies", "--cut", "ab"], "--cut")
    _refused(capsys, ["deploy", "generate", "--nodes", "0"], "--nodes")


def test_policies_leave_out_the_cut_link_only(capsys):
    assert main(["deploy", "policies", "--cut", "a:b"]) == 0
    cut = list(yaml.safe_load_all(capsys.readouterr().out))
    assert main(["deploy", "policies"]) == 0
    whole = list(yaml.safe_load_all(capsys.readouterr().out))
    changed = [(w["metadata"]["name"]) for w, c in zip(whole, cut, strict=True) if w != c]
    assert changed == ["node-a-links", "node-b-links"]  # a's egress, b's ingress
