"""``python -m starling.node serve|health``: run one node, or ask one whether it serves.

``serve`` takes its settings from ``--config node.yaml`` (:mod:`starling.node.config`) with flags
over the file: ``--id``, ``--listen``, ``--store``, and the node's own data (``--shard K``
for synthetic shard K, or ``--data-file PATH``), used when an experiment says
``data: {source: node}``. ``health HOST:PORT`` runs the standard gRPC health check and
exits 0 when the node is SERVING, 1 otherwise (what a container healthcheck calls).

Once serving, exactly one line goes to stdout — ``starling-node listening on HOST:PORT``
with the real port (``PORT`` may be 0 for a free one) — which is what an orchestrator
waits for. Logs go to stderr. SIGTERM or SIGINT stops the round loop, makes the sample
store durable, closes the links and exits with 0. An address that cannot be bound is one
line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import errno
import faulthandler
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from dataclasses import replace
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn

from starling.node.logs import FORMATS, quiet_when_closed, set_context
from starling.node.logs import setup as setup_logs
from starling.node.params import ConfigError, host_port, plain_name
from starling.node.security import ORCHESTRATOR_ID, is_loopback, others_can_read
from starling.node.shown import name_too_long_line

if TYPE_CHECKING:  # loaded when the node serves, not for a usage error
    from collections.abc import Callable

    from starling.node.config import NodeSettings
    from starling.node.runtime.server import NodeServer

__all__ = ["OneLineParser", "main"]

EXIT_USAGE = 2
SIGNAL_POLL_SECONDS = 0.2
"""How often the main thread looks for a SIGTERM/SIGINT the handler noted."""
LOG_LEVELS = ["DEBUG", "INFO", "WARNING", "ERROR"]


class OneLineParser(argparse.ArgumentParser):
    """argparse, with a mistake on the command line said in one line naming the option and
    the value (``starling: status --format: invalid choice: 'xml' (choose from 'text',
    'json')``), exit code 2, instead of the usage block and a line of its own. Its
    subcommands' parsers are of this class too (argparse makes them with the parent's)."""

    lead = "starling"
    """What the line starts with: the command as the user knows it."""
    root = "starling"
    """The top parser's ``prog``: the line names the subcommand after it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # An option is given by its whole name: argparse would take ``--ou`` for ``--out``,
        # and a later option that shares the prefix would then change what a script meant.
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        where = self.prog.removeprefix(self.root).strip()
        message = message.removeprefix("argument ")
        if message.startswith("the following arguments are required"):
            message = message.replace("the following arguments are required", "missing")
        if where:
            where += " " if message.startswith("-") else ": "
        self.exit(EXIT_USAGE, f"{self.lead}: {where}{message} (see {self.prog} --help)\n")

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:
        """argparse's, and then a value left empty (``--metrics ''``, ``--store ' '``) is a
        mistake too: every option here names something, and an empty one silently meant
        "none" (no metrics endpoint, a temporary store)."""
        parsed = super().parse_args(args, namespace)
        used = self._used(parsed)
        for parser in used:
            for action in parser._actions:
                value = getattr(parsed, action.dest, None) if action.dest else None
                if value == action.default:
                    continue  # not given: "" may be a default's meaning (--service)
                values = value if isinstance(value, list) else [value]
                if any(isinstance(v, str) and not v.strip() for v in values):
                    name = action.option_strings[0] if action.option_strings else action.metavar
                    used[-1].error(f"{name or action.dest}: expected a value, got {value!r}")
        return parsed

    def _used(self, parsed: argparse.Namespace) -> list[argparse.ArgumentParser]:
        """This parser and the subcommands' parsers ``parsed`` went through."""
        chain: list[argparse.ArgumentParser] = [self]
        while True:
            sub = next(
                (a for a in chain[-1]._actions if isinstance(a, argparse._SubParsersAction)), None
            )
            if sub is None:
                return chain
            name = getattr(parsed, sub.dest, None) if sub.dest != argparse.SUPPRESS else None
            chosen = sub.choices.get(name) if isinstance(name, str) else None
            if chosen is None:
                chosen = next((p for p in sub.choices.values() if _handles(p, parsed)), None)
            if chosen is None:
                return chain
            chain.append(chosen)


def _handles(parser: argparse.ArgumentParser, parsed: argparse.Namespace) -> bool:
    """Whether ``parser`` (or a subcommand of it) set ``parsed``'s handler."""
    handler = getattr(parsed, "handler", None)
    if handler is None:
        return False
    if parser.get_default("handler") is handler:
        return True
    return any(
        _handles(p, parsed)
        for a in parser._actions
        if isinstance(a, argparse._SubParsersAction)
        for p in a.choices.values()
    )


def _parser(prog: str = "python -m starling.node") -> argparse.ArgumentParser:
    kind = type("NodeParser", (OneLineParser,), {"lead": "starling-node", "root": prog})
    parser = kind(prog=prog, description="A Starling node: one gRPC service, one sampler.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    serve = sub.add_parser("serve", help="serve the node's gRPC API until SIGTERM/SIGINT")
    serve.add_argument(
        "--config", metavar="FILE", help="node settings (YAML); the flags below override it"
    )
    serve.add_argument(
        "--id",
        metavar="ID",
        help="the experiment node id this node serves; configuring it as another is refused",
    )
    serve.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="address to bind; port 0 picks a free port (default: 127.0.0.1:0)",
    )
    serve.add_argument(
        "--store",
        "--state-dir",
        dest="store",
        metavar="DIR",
        help="where samples and checkpoints live (default: a fresh temporary directory, "
        "removed at a clean exit); give the same DIR after a crash to resume",
    )
    own = serve.add_argument_group(
        "the node's own data", "used when an experiment says data: {source: node}"
    )
    own.add_argument("--shard", type=int, metavar="K", help="synthetic shard K")
    own.add_argument(
        "--data-size",
        dest="size",
        type=int,
        metavar="N",
        help="points in the synthetic shard (default 50)",
    )
    own.add_argument(
        "--data-seed",
        dest="seed",
        type=int,
        metavar="S",
        help="seed of the synthetic shards (default 0)",
    )
    own.add_argument(
        "--data-file",
        dest="path",
        metavar="PATH",
        help="a file on this machine: all its rows are this node's",
    )
    own.add_argument(
        "--data-format",
        dest="format",
        metavar="FMT",
        help="npz, csv or libsvm (default: from the name)",
    )
    own.add_argument(
        "--data-dir",
        dest="data_dir",
        metavar="DIR",
        help="files an experiment names must lie under DIR (default: the working directory)",
    )
    access = serve.add_argument_group(
        "access", "mutual TLS on every channel, or a token for Control (docs/security/index.md)"
    )
    access.add_argument("--tls-ca", metavar="PEM", help="CA that signs every party's certificate")
    access.add_argument("--tls-cert", metavar="PEM", help="this node's certificate")
    access.add_argument("--tls-key", metavar="PEM", help="this node's private key")
    access.add_argument(
        "--tls-crl",
        metavar="PEM",
        help="the CA's revocation list (starling certs revoke): callers it lists are refused",
    )
    access.add_argument(
        "--token-file",
        metavar="FILE",
        help="Control calls must carry this node's own token (TLS or not; made by "
        "'starling certs tokens', re-read when it changes)",
    )
    access.add_argument(
        "--insecure",
        action="store_true",
        default=None,
        help="a non-loopback --listen without TLS (private network: tokens and the run's "
        "link secrets cross it in clear)",
    )
    serve.add_argument(
        "--max-workers",
        type=int,
        default=None,
        metavar="N",
        help="Control calls served at once, on threads of their own (default 16); health "
        "and samples have theirs, peer streams and reflection run on the node's event loop",
    )
    serve.add_argument(
        "--max-peer-streams",
        type=int,
        default=None,
        metavar="N",
        help="concurrent inbound peer streams; more are refused with RESOURCE_EXHAUSTED "
        "(default: 256)",
    )
    serve.add_argument(
        "--max-message-bytes",
        type=int,
        default=None,
        metavar="N",
        help="largest gRPC message sent, and largest iterate joined from its parts "
        "(default: 256 MiB)",
    )
    serve.add_argument(
        "--max-request-bytes",
        type=int,
        default=None,
        metavar="N",
        help="largest single message read, before the caller is known (default: 4 MiB; "
        "at least 2 MiB: iterates cross in 1 MiB parts)",
    )
    serve.add_argument(
        "--screen-bound",
        type=float,
        default=None,
        metavar="X",
        help="refuse iterates holding a value beyond ±X, counted 'screened' per peer "
        "(default: 1e6; 0: off)",
    )
    serve.add_argument("--log-level", choices=LOG_LEVELS, help="stderr log level (default: INFO)")
    serve.add_argument(
        "--log-format",
        choices=["text", "json"],
        help="stderr log lines: text (default) or json, one object per line",
    )
    ops = serve.add_argument_group(
        "operating", "reflection and metrics (docs/guides/operating-nodes.md)"
    )
    ops.add_argument(
        "--metrics",
        metavar="ADDR",
        help="serve Prometheus metrics on HOST:PORT (a bare PORT: on loopback); off by default",
    )
    ops.add_argument(
        "--no-reflection",
        dest="reflection",
        action="store_false",
        default=None,
        help="do not serve gRPC reflection (on by default)",
    )
    check = sub.add_parser("health", help="exit 0 if the node at HOST:PORT is serving")
    check.add_argument("address", metavar="HOST:PORT")
    check.add_argument("--timeout", type=float, default=3.0, metavar="SECONDS")
    check.add_argument(
        "--service",
        default="",
        metavar="NAME",
        help="one service's health, e.g. starling.v1.Peer: NOT_SERVING while the node is "
        "stopping, stopped or failed (default: the whole server)",
    )
    check.add_argument(
        "--config", metavar="FILE", help="a node config whose tls section (if any) the check uses"
    )
    check.add_argument(
        "--id", metavar="ID", help="with TLS (required): the node id its certificate must name"
    )
    for name in ("ca", "cert", "key"):
        check.add_argument(f"--tls-{name}", metavar="PEM", help=f"with TLS: the {name} to use")
    return parser


def _split(listen: str, where: str, least_port: int = 0) -> tuple[str, int]:
    """(host, port) of ``listen``; a ConfigError naming ``where`` if it is not HOST:PORT."""
    return host_port(listen, where, least_port)


def _writable_store(store: str) -> str | None:
    """Why the node could not keep samples and checkpoints in ``store``, if it could not:
    the folder is made if need be and a file written and removed in it. A node that
    served on with a store it could not write failed the first run it was given."""
    try:
        os.makedirs(store, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".starling-probe-", dir=store)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return os.strerror(exc.errno).lower() if exc.errno else str(exc)
    return None


def _probe(host: str, port: int) -> None:
    """Bind and release ``host:port`` once, so a taken port gives a clear error (gRPC's
    own message on this is a C-core log line). Raises OSError."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        # As gRPC does: a port in TIME_WAIT is free, a listening one is not.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(address)


def _fail(message: str) -> int:
    print(f"starling-node: {message}", file=sys.stderr, flush=True)
    return EXIT_USAGE


def _settings(args: argparse.Namespace) -> NodeSettings:
    """The config file's settings with the flags given over them."""
    from starling.node.config import load_settings, override
    from starling.node.security import tls_files

    settings = override(
        load_settings(args.config),
        id=args.id,
        listen=args.listen,
        store=args.store,
        log_level=args.log_level,
        shard=args.shard,
        size=args.size,
        seed=args.seed,
        path=args.path,
        format=args.format,
        data_dir=args.data_dir,
        token_file=args.token_file,
        insecure=args.insecure,
        metrics=args.metrics,
        reflection=args.reflection,
        log_format=args.log_format,
        screen_bound=args.screen_bound,
    )
    given = {k: getattr(args, f"tls_{k}") for k in ("ca", "cert", "key")}
    if any(given.values()):
        if not all(given.values()):
            missing = next(k for k, v in given.items() if not v)
            raise ConfigError(f"--tls-{missing}: required with the other --tls-* flags")
        settings = replace(settings, tls=tls_files({**given, "crl": args.tls_crl}, "--tls"))
    elif args.tls_crl:
        if settings.tls is None:
            raise ConfigError("--tls-crl: needs TLS (--tls-ca, --tls-cert, --tls-key or tls:)")
        settings = replace(settings, tls=replace(settings.tls, crl=args.tls_crl))
    if settings.id and not plain_name(settings.id):
        raise ConfigError(
            f"id: expected a node id of letters, digits, '-', '_' and '.' (not first), "
            f"got {settings.id!r}"
        )
    if settings.id == ORCHESTRATOR_ID:
        raise ConfigError(
            f"id: {ORCHESTRATOR_ID!r} is the orchestrator's identity; no node may take it"
        )
    if settings.log_level not in LOG_LEVELS:
        raise ConfigError(f"log_level: expected one of {', '.join(LOG_LEVELS)}")
    if settings.log_format not in FORMATS:
        raise ConfigError(f"log_format: expected one of {', '.join(FORMATS)}")
    if settings.data_dir and not os.path.isdir(settings.data_dir):
        # Every file an experiment names must lie under it: a node that could read none
        # would fail each experiment's Configure instead of refusing to start.
        raise ConfigError(f"data_dir: {settings.data_dir!r} is not a folder")
    from starling.node.config import check_home_file, check_screen_bound

    check_home_file(settings.data)

    try:
        check_screen_bound(settings.screen_bound, "--screen-bound")
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if settings.metrics:
        from starling.node.exporter import parse_metrics_address

        parse_metrics_address(settings.metrics, "metrics")
    return settings


def serve(args: argparse.Namespace) -> int:
    try:
        settings = _settings(args)
    except ConfigError as exc:
        return _fail(str(exc))
    os.umask(0o077)  # the store, its checkpoints and anything else written: owner only
    # Every refusal the flags alone decide, in one line on stderr, before gRPC's own lines
    # are captured (below).
    args.listen = settings.listen
    refusal = (
        _limits_refusal(args) or _store_refusal(settings) or _listen_refusal(settings, args.listen)
    )
    if refusal is not None:
        return _fail(refusal)
    # gRPC's default verbosity reports a refused TLS handshake (an INFO line): the node
    # counts it, and its own log level decides whether it is shown. An orchestrator's ERROR,
    # inherited by the nodes it starts, would hide it from the count; asking INFO outright
    # adds gRPC's warning that INFO is no production level. Before grpc is imported.
    if os.environ.get("GRPC_VERBOSITY", "").upper() not in ("INFO", "DEBUG"):
        os.environ.pop("GRPC_VERBOSITY", None)
    from starling.node.native_log import capture

    native = capture()  # gRPC's own lines (fd 2) through the logger set up next
    setup_logs(settings.log_format, settings.log_level)
    set_context(node=settings.id or None)
    try:
        server, state_dir, temporary = _open_server(settings, args, native.refusals)
    except (ConfigError, OSError) as exc:
        return _fail(str(exc))
    return _serve_until_signalled(server, settings, state_dir, temporary)


def _limits_refusal(args: argparse.Namespace) -> str | None:
    """Why the size and count flags cannot work, if they cannot."""
    for flag, value, least in (
        ("--max-peer-streams", args.max_peer_streams, 1),
        ("--max-workers", args.max_workers, 1),
        ("--max-message-bytes", args.max_message_bytes, 1024),  # a message's envelope alone
        ("--max-request-bytes", args.max_request_bytes, 2 * 1024 * 1024),
    ):
        if value is not None and value < least:
            return f"{flag}: must be at least {least}, got {value}"
    for flag, value in (
        ("--max-message-bytes", args.max_message_bytes),
        ("--max-request-bytes", args.max_request_bytes),
    ):
        # gRPC takes these as a C int: a larger one was an OverflowError traceback.
        if value is not None and value > MAX_GRPC_BYTES:
            return f"{flag}: must be at most {MAX_GRPC_BYTES} (2 GiB - 1), got {value}"
    return None


MAX_GRPC_BYTES = 2**31 - 1
"""The largest message size gRPC's channel options take (a C int)."""


def _store_refusal(settings: NodeSettings) -> str | None:
    if settings.store and os.path.exists(settings.store) and not os.path.isdir(settings.store):
        return f"--store {settings.store}: is a file, not a folder"
    if settings.store and (why := _writable_store(settings.store)) is not None:
        return f"--store {settings.store}: cannot write there ({why})"
    return None


def _listen_refusal(settings: NodeSettings, listen: str) -> str | None:
    """Why the node must not listen on ``listen`` (a public address without TLS, a port
    taken), if it must not."""
    try:
        host, port = _split(listen, "--listen")
        if settings.tls is None and not settings.insecure and not is_loopback(host):
            if settings.token_file:
                return (
                    f"--listen {listen}: refusing a token without TLS on a non-loopback "
                    "address: the token and the run's link secrets would cross the network in "
                    "clear (give tls: in the config or --tls-*, or --insecure to accept that "
                    "on a private network)"
                )
            return (
                f"--listen {listen}: refusing a non-loopback address without TLS "
                "(give tls: in the config or --tls-*, or --insecure on a private network)"
            )
        if port != 0:
            _probe(host, port)
    except ConfigError as exc:
        return str(exc)
    except OSError as exc:
        reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
        if exc.errno == errno.EADDRINUSE:
            reason = "address already in use"
        return f"cannot listen on {listen}: {reason}"
    return None


def _open_server(
    settings: NodeSettings,
    args: argparse.Namespace,
    native_refusals: Callable[[], dict[str, int]],
) -> tuple[NodeServer, str, bool]:
    """The node's server, bound and not started, on its store (a temporary one when none is
    given: returned third, True); the files it needs checked first (ConfigError, OSError)."""
    # Imported late so that usage errors are fast and gRPC is never loaded for them.
    from starling.node.runtime.server import NodeServer
    from starling.node.runtime.transport import (
        DEFAULT_MAX_PEER_STREAMS,
        DEFAULT_MAX_REQUEST_BYTES,
        MAX_MESSAGE_BYTES,
    )
    from starling.node.tokens import NodeTokens

    tokens = NodeTokens(settings.token_file) if settings.token_file else None
    # Files no handshake could use are one line now, not a gRPC error later.
    warnings = settings.tls.check(settings.id) if settings.tls is not None else []
    if tokens:
        warnings += [w for w in [others_can_read(settings.token_file, "token_file")] if w]
    for warning in warnings:
        logging.getLogger("starling.node").warning(warning)
    temporary = not settings.store
    state_dir = tempfile.mkdtemp(prefix="starling-node-") if temporary else settings.store
    try:
        server = NodeServer(
            args.listen,
            state_dir,
            node_id=settings.id,
            data=settings.data,
            max_workers=args.max_workers,
            max_peer_streams=args.max_peer_streams or DEFAULT_MAX_PEER_STREAMS,
            max_message_bytes=args.max_message_bytes or MAX_MESSAGE_BYTES,
            max_request_bytes=args.max_request_bytes or DEFAULT_MAX_REQUEST_BYTES,
            tls=settings.tls,
            tokens=tokens,
            native_refusals=native_refusals,
            data_dir=settings.data_dir or os.getcwd(),
            reflection=settings.reflection,
            metrics=settings.metrics,
            screen_bound=settings.screen_bound,
        )
    except OSError:
        if temporary:
            shutil.rmtree(state_dir, ignore_errors=True)
        raise
    return server, state_dir, temporary


def _serve_until_signalled(
    server: NodeServer, settings: NodeSettings, state_dir: str, temporary: bool
) -> int:
    """Serve until SIGTERM or SIGINT, then shut down in order (a temporary store removed)."""
    from starling.node.protocol.contract import READY_PREFIX

    received: list[int] = []
    # `kill -USR1 <pid>` prints every thread's stack to stderr: how to see where a live
    # node is waiting without stopping it.
    faulthandler.register(signal.SIGUSR1, all_threads=True)

    # Not covered in-process: the tests' node subprocesses exercise it.
    # The handler takes no lock: it runs in the main thread between two bytecodes, maybe
    # while that thread holds a lock it would wait for (an Event's, inside Event.wait) —
    # a node killed that way hung for ever. The main thread polls the list instead.
    def on_signal(signum: int, frame: FrameType | None) -> None:  # pragma: no cover
        received.append(signum)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        try:
            server.start()
        except ConfigError as exc:  # the metrics address could not be bound
            return _fail(str(exc))
        # `serve | head -1` reads the address and goes: the node serves on, stdout silent.
        quiet_when_closed()
        print(f"{READY_PREFIX}{server.address}", flush=True)
        logging.getLogger("starling.node").info(
            "state dir %s; %s", state_dir, _access_line(settings, bool(settings.token_file))
        )
        while not received:
            time.sleep(SIGNAL_POLL_SECONDS)
        logging.getLogger("starling.node").info(
            "signal %s: shutting down", signal.Signals(received[0]).name
        )
    finally:
        server.shutdown()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if temporary:
            shutil.rmtree(state_dir, ignore_errors=True)
    return 0


def _access_line(settings: NodeSettings, token: bool) -> str:
    """What guards this node, for the log: paths and modes, never a key or a token."""
    if settings.tls is not None:
        both = "; Control needs the token too" if token else ""
        return f"mutual TLS (cert {settings.tls.cert}, CA {settings.tls.ca}){both}"
    return "no TLS; Control " + ("needs the token" if token else "is open (no token file)")


def health(args: argparse.Namespace) -> int:
    """The standard gRPC health check: 0 if SERVING, 1 (one line on stderr) if not."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    try:
        _split(args.address, "HOST:PORT", least_port=1)
    except ConfigError as exc:
        return _fail(str(exc))
    if not 0 < args.timeout < 1e6:
        return _fail(f"--timeout: expected a number of seconds above 0, got {args.timeout:g}")
    from starling.node.config import load_settings
    from starling.node.security import channel_credentials, tls_files

    credentials, server_id = None, ""
    try:
        settings = load_settings(args.config)
        given = {k: getattr(args, f"tls_{k}") for k in ("ca", "cert", "key")}
        tls = tls_files(given, "--tls") if any(given.values()) else settings.tls
        if tls is not None:
            credentials, server_id = channel_credentials(tls), args.id or settings.id
            if not server_id:
                # Without an id the check is of the address's name, which every certificate
                # of the CA may hold (localhost, 127.0.0.1): any node would pass.
                raise ConfigError(
                    "--id: required with TLS: the node id the certificate at the address "
                    "must name (or id: in --config)"
                )
    except ConfigError as exc:
        return _fail(str(exc))
    from starling.node.runtime.transport import open_channel

    with open_channel(args.address, credentials, server_id=server_id) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            request = health_pb2.HealthCheckRequest(service=args.service)
            reply = stub.Check(request, timeout=args.timeout)
        except grpc.RpcError as exc:
            from starling.node.unreachable import unreachable_reason

            why = unreachable_reason(exc, credentials is not None, server_id)
            print(f"starling-node: {args.address}: {why}", file=sys.stderr)
            return 1
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    if reply.status != health_pb2.HealthCheckResponse.SERVING:
        print(f"starling-node: {args.address}: {status.lower()}", file=sys.stderr)
        return 1
    quiet_when_closed()
    print(f"{args.address}: {status.lower()}")
    return 0


def main(argv: list[str] | None = None, prog: str = "python -m starling.node") -> int:
    """``prog`` is how usage lines name the command (``starling node`` through starling)."""
    try:
        args = _parser(prog).parse_args(argv)
    except SystemExit as exc:  # a mistake said in one line (exit 2); --help (exit 0) exits
        if not exc.code:
            raise
        return int(exc.code)
    try:
        if args.command == "health":
            return health(args)
        setup_logs("text", "INFO")
        if args.command == "serve":
            return serve(args)
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            raise
        return _fail(name_too_long_line(exc))
    return EXIT_USAGE  # pragma: no cover - argparse requires a command
