"""The ``starling`` command: its parser and one module per group of subcommands. Nothing imports
it."""
