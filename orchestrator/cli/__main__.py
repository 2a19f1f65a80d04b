"""``python -m starling.orchestrator.cli ...`` is the ``starling`` command."""

from starling.orchestrator.cli.main import main

raise SystemExit(main())
