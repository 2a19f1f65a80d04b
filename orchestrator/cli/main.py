"""The ``starling`` command: its parser, assembled from one module per group of subcommands,
and the guard that turns every user mistake into one line and an exit code.

``starling node serve|health`` is the node's own command line (:mod:`starling.node.cli`),
dispatched before anything of the orchestrator is imported.

Calm at the edges: a mistake on the command line is one line naming the option
(:class:`~starling.node.cli.OneLineParser`), exit 2; standard output closing early (``|
head``) silences it and the command carries on to its own end and exit code
(:func:`~starling.node.logs.quiet_when_closed`); a Ctrl-C at any moment, loading included, is
one line and exit 130. Only the standard library is imported before that guard is up.
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import signal
import sys
from collections.abc import Callable

from starling.orchestrator.cli.run import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE

__all__ = ["main"]


def cmd_node(rest: list[str]) -> int:
    """``starling node serve|health ...`` is ``python -m starling.node serve|health ...``."""
    from starling.node.cli import main as node_main

    return node_main(rest, prog="starling node")


def main(argv: list[str] | None = None) -> int:
    """The command; ``argv`` None: this process's own arguments (the ``starling`` program),
    which also lets a Ctrl-C that comes once the command is done pass (the interpreter would
    end by it, killed by SIGINT, instead of with the command's own exit code)."""
    program = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    stdout = sys.stdout
    code = EXIT_INTERRUPTED
    try:
        from starling.node.logs import quiet_when_closed

        quiet_when_closed()
        code = _main(argv)
        return code
    except KeyboardInterrupt:  # while the command was being read, before anything ran
        _INTERRUPTED.append(True)
        print("starling: interrupted before anything ran; nothing was written", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        sys.stdout = stdout
        if program:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            watch = sys.modules.get("starling.orchestrator.cli.watch")
            if _INTERRUPTED or (watch is not None and watch.left_by_ctrl_c):
                _leave(code)


_INTERRUPTED: list[bool] = []
"""Set when this process caught a Ctrl-C (or SIGTERM)."""


def _leave(code: int) -> None:
    """End the program now with ``code``, its output flushed. After a Ctrl-C the
    interpreter may otherwise end by SIGINT whatever the command returned: a library's
    C code that ran Python (PyRun_String) when the interrupt came leaves a flag that
    makes it kill itself with SIGINT at exit, though the interrupt was handled. Everything
    a run writes is written by then (the guard returns only after it)."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _main(argv: list[str]) -> int:
    if argv[:2] != ["node", "serve"]:
        # gRPC's core logs each failed TLS handshake of a client at INFO on stderr, around
        # the one line that says which node and why (starling.node.unreachable). A node
        # keeps them: they are its trace of a client of another CA. Set before grpc loads.
        os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    if argv[:1] == ["node"] and argv[1:2] in (["serve"], ["health"]):
        # Before anything of the orchestrator's is imported: a device's node (the systemd
        # unit runs `starling node serve`) pays only for the node (12 MB and 0.5 s less).
        return _guard(lambda: cmd_node(argv[1:]))
    # Results folders, run records, the nodes' stores (local nodes inherit it) and key files:
    # owner-only, whatever the shell's umask. A results folder holds a run's samples and the
    # paths of its credentials; sharing one is the user's choice (STARLING_UMASK, or chmod),
    # never a default.
    umask = _umask_asked()
    if isinstance(umask, str):
        print(f"starling: {umask}", file=sys.stderr)
        return EXIT_USAGE
    os.umask(umask)
    from starling.orchestrator.cli.live import join_option_values

    parser = _parser()
    try:
        args = parser.parse_args(join_option_values(argv))
    except SystemExit as exc:  # a mistake said in one line (exit 2); --help (exit 0) exits
        if not exc.code:
            raise
        return int(exc.code)
    if not getattr(args, "handler", None):
        parser.print_help()
        return EXIT_USAGE
    return _guard(lambda: _handled(args))


def _handled(args: argparse.Namespace) -> int:
    """The command, its Ctrl-C and SIGTERM raised as interrupts that wait for the end of
    any gRPC call it is in on this thread
    (:mod:`starling.orchestrator.core.interrupts`): raised inside gRPC's code, an interrupt
    could leave the node's channel hung, and the command's own closing of that channel
    (``starling collect``'s, ``starling links``') then waited for ever."""
    from starling.orchestrator.core.interrupts import interrupts_remembered

    with interrupts_remembered():
        return args.handler(args)


UMASK_VARIABLE = "STARLING_UMASK"
"""Environment variable: the octal umask of everything the command writes (default 077,
owner-only). The orchestrator image's entrypoint sets 000 when the results folder belongs
to root, so that the host user who did not make it can still read and delete the results."""


def _umask_asked() -> int | str:
    """The umask :data:`UMASK_VARIABLE` asks for (077 when it is unset), or the one-line
    reason it cannot be used."""
    from starling.node.shown import shown

    text = os.environ.get(UMASK_VARIABLE)
    if text is None:
        return 0o077
    try:
        value = int(text.strip(), 8)
    except ValueError:
        value = -1
    if not 0 <= value <= 0o777:
        expected = "expected an octal umask from 000 to 777 (such as 077)"
        return f"{UMASK_VARIABLE}: {expected}, got {shown(text)}"
    return value


def _guard(action: Callable[[], int]) -> int:
    from starling.node.params import ConfigError
    from starling.node.shown import name_too_long_line, shorten
    from starling.orchestrator.core.errors import BackendError, NodeUnavailable
    from starling.orchestrator.results.unwritable import ResultsUnwritable

    try:
        return action()
    except ResultsUnwritable as exc:
        print(f"starling: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except (ConfigError, NodeUnavailable, BackendError) as exc:
        print(f"starling: {shorten(str(exc))}", file=sys.stderr)  # long values cut
        return EXIT_USAGE
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            raise
        # A path with a name longer than the file system takes: Path.exists() and its kin
        # raise this rather than answer, wherever a command looks at a path it was given.
        print(f"starling: {name_too_long_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt as exc:
        _INTERRUPTED.append(True)
        said = str(exc) or "interrupted before anything ran; nothing was written"
        print(f"starling: {said}", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        exporter = sys.modules.get("starling.orchestrator.execution.exporter")
        if exporter is not None:  # a --metrics endpoint was served: stop it with the command
            exporter.stop_run_metrics()


def _parser():
    from starling.node.cli import OneLineParser
    from starling.orchestrator.cli import deploy, docker, info, live, report, run

    parser = OneLineParser(
        prog="starling", description="Decentralised Bayesian sampling on real edge networks."
    )
    sub = parser.add_subparsers(metavar="COMMAND")
    run.add_commands(sub)
    report.add_commands(sub)
    info.add_commands(sub)
    node = sub.add_parser(
        "node",
        help="run one node (starling node serve --config node.yaml) or check one "
        "(starling node health HOST:PORT)",
    )
    node.add_argument("action", choices=["serve", "health"])
    live.add_commands(sub)
    deploy.add_commands(sub)
    docker.add_commands(sub)
    return parser
