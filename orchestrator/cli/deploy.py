"""``starling deploy generate|policies`` and ``starling certs``: files that deploy Starling
beyond one process, written for the user. ``starling compose generate`` is the older name of
``deploy generate --target compose`` and still works."""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

from starling.node.params import ConfigError
from starling.orchestrator.config.shipped import experiment_file
from starling.orchestrator.config.yaml_files import read_yaml_file
from starling.orchestrator.core.files import check_out_file, write_replacing
from starling.orchestrator.deploy import certs, compose, kubernetes, swarm
from starling.orchestrator.deploy.testbed import DEFAULT_EXPERIMENT, Testbed, make_testbed

__all__ = ["add_commands"]

TARGETS = ("compose", "swarm", "kubernetes")
CERTS_AT = {"swarm": swarm.SECRETS_AT, "kubernetes": kubernetes.CERTS_AT}
"""Where each target mounts a party's TLS files in its containers."""


def _testbed(args: argparse.Namespace, target: str) -> Testbed:
    if args.experiment is not None and not args.experiment.strip():
        raise ConfigError(
            f"--experiment: expected a file or a shipped example's name, got {args.experiment!r}"
        )
    tls = getattr(args, "tls", None)
    if getattr(args, "collect", None) is not None and target != "kubernetes":
        raise ConfigError("--collect: a recovery Job is for --target kubernetes")
    if tls is not None and target not in CERTS_AT:
        raise ConfigError(
            "--tls: the compose target takes its certificates from compose.tls.yml; "
            "use --target swarm or kubernetes"
        )
    count = args.nodes
    if args.experiment is None and count is None:
        count = 5  # the shipped testbed: five nodes a..e
    base = read_yaml_file(experiment_file(args.experiment or DEFAULT_EXPERIMENT))
    return make_testbed(
        base,
        count,
        args.topology,
        args.data_size,
        args.data_seed,
        certs_at=CERTS_AT[target] if tls is not None else None,
    )


def _tls_files(folder: str, testbed: Testbed) -> dict[str, Path]:
    """File name -> path of every TLS file the deployment hands out, all checked to exist."""
    where = Path(folder).resolve()
    if not where.is_dir():
        raise ConfigError(f"--tls: {folder} is not a folder (make one: starling certs init)")
    names = testbed.tls_files()
    missing = [name for name in names if not (where / name).is_file()]
    if missing:
        raise ConfigError(
            f"--tls: {folder} lacks {', '.join(missing)} (starling certs init {folder} "
            f"--nodes {','.join(testbed.ids)} --host a=node-a ...)"
        )
    return {name: where / name for name in names}


def _write(text: str, out: str | None, overwrite: bool) -> None:
    if out is None:
        sys.stdout.write(text)
        return
    target = check_out_file(out, overwrite)
    write_replacing(target, lambda path: path.write_text(text, encoding="utf-8"))


def _write_folder(files: dict[str, str], out: str | None, overwrite: bool) -> None:
    if out is None:
        raise ConfigError("--out: the swarm target writes a folder (stack.yml, experiment.yaml)")
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"--out: {folder} is not a folder")
    if folder.parent.is_dir():
        folder.mkdir(exist_ok=True)  # one level: a mistyped path is refused below
    targets = {name: check_out_file(folder / name, overwrite) for name in files}
    for name, text in files.items():
        write_replacing(targets[name], functools.partial(_write_text, text=text))
    print(f"wrote {', '.join(str(t) for t in targets.values())}")


def _write_text(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def cmd_generate(args: argparse.Namespace) -> int:
    target = args.target
    testbed = _testbed(args, target)
    if target == "compose":
        _write(compose.generate(testbed), args.out, args.overwrite)
    elif target == "swarm":
        files = _tls_files(args.tls, testbed) if args.tls is not None else None
        certs_folder = next(iter(files.values())).parent if files else None
        _write_folder(swarm.generate(testbed, certs_folder), args.out, args.overwrite)
    elif args.collect is not None:
        job = kubernetes.recovery_job(testbed, args.collect)
        header = "# Stop the nodes' rounds and write the run's results from what they stored.\n"
        _write(kubernetes.render([job], header), args.out, args.overwrite)
    else:
        tls = _tls_files(args.tls, testbed) if args.tls is not None else None
        contents = {name: path.read_bytes() for name, path in tls.items()} if tls else None
        text = kubernetes.generate(testbed, contents, args.storage)
        _write(text, args.out, args.overwrite)
    return 0


def _link(text: str, testbed: Testbed) -> tuple[str, str]:
    sender, colon, receiver = text.partition(":")
    if not colon or (sender, receiver) not in testbed.links():
        raise ConfigError(f"--cut: expected SENDER:RECEIVER, a link of the topology, got {text!r}")
    return sender, receiver


def cmd_policies(args: argparse.Namespace) -> int:
    testbed = _testbed(args, "kubernetes")
    cut = [_link(text, testbed) for text in args.cut]
    header = (
        "# Starling's NetworkPolicies"
        + (f", links cut: {', '.join(f'{a}->{b}' for a, b in cut)}" if cut else "")
        + ".\n#   kubectl apply -n NAMESPACE -f THIS_FILE   (without --cut: every link again)\n"
    )
    _write(
        kubernetes.render(kubernetes.network_policies(testbed, cut), header),
        args.out,
        args.overwrite,
    )
    return 0


def _testbed_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--nodes",
        type=int,
        help="node count: nodes a, b, ... on --topology (default: the experiment's own "
        "nodes; 5 for the shipped testbed)",
    )
    parser.add_argument(
        "--topology",
        help="topology kind: ring, full, star, directed_ring, ... (default: the experiment's "
        "own; ring with --nodes)",
    )
    parser.add_argument(
        "--experiment",
        metavar="FILE",
        help="experiment YAML file, or a shipped example's name (starling examples), to run "
        f"(default: the shipped {DEFAULT_EXPERIMENT})",
    )
    parser.add_argument("--data-size", type=int, default=50, help="points per node (default 50)")
    parser.add_argument("--data-seed", type=int, default=1, help="seed of the shards (default 1)")
    parser.add_argument(
        "--out",
        metavar="PATH",
        help="write here instead of stdout (swarm: a folder, required); an existing file is "
        "refused without --overwrite",
    )
    parser.add_argument("--overwrite", action="store_true", help="--out may replace its files")


def add_commands(sub) -> None:
    """``starling deploy``, ``starling compose generate`` (its alias) and ``starling certs``."""
    deploy = sub.add_parser(
        "deploy", help="deployment files: compose, swarm stack, Kubernetes manifests"
    )
    actions = deploy.add_subparsers(metavar="ACTION")
    gen = actions.add_parser(
        "generate", help="write the files that deploy an experiment's nodes and orchestrator"
    )
    gen.add_argument(
        "--target",
        choices=TARGETS,
        default="compose",
        help="compose (one Docker host), swarm (docker stack deploy) or kubernetes "
        "(kubectl apply); default compose",
    )
    _testbed_options(gen)
    gen.add_argument(
        "--tls",
        metavar="DIR",
        help="swarm, kubernetes: mutual TLS with the certificates of DIR (starling certs "
        "init DIR --nodes a,b,... --host a=node-a ...), handed out as secrets",
    )
    gen.add_argument(
        "--storage", default="1Gi", help="kubernetes: the size of each volume claim (1Gi)"
    )
    gen.add_argument(
        "--collect",
        metavar="RUN_FOLDER",
        help="kubernetes: only a Job that recovers the run in RUN_FOLDER (/results/NAME/latest) "
        "after its orchestrator died: starling stop, then starling collect",
    )
    gen.set_defaults(handler=cmd_generate)
    policies = actions.add_parser(
        "policies",
        help="Kubernetes NetworkPolicies alone, with links cut (--cut a:b): a kernel-level "
        "link cut on Kubernetes",
    )
    _testbed_options(policies)
    policies.add_argument(
        "--cut",
        action="append",
        default=[],
        metavar="SENDER:RECEIVER",
        help="a link to leave out (repeatable); without any, every link of the topology",
    )
    policies.set_defaults(handler=cmd_policies)

    old = sub.add_parser(
        "compose", help="moved: starling deploy generate --target compose (still works here)"
    )
    old_actions = old.add_subparsers(metavar="ACTION")
    alias = old_actions.add_parser(
        "generate", help="= starling deploy generate --target compose: a compose file"
    )
    _testbed_options(alias)
    alias.set_defaults(handler=cmd_generate, target="compose", tls=None, collect=None)
    certs.add_commands(sub)
