"""Plain pieces every stage shares: errors, what the user is told, run phases, signals, schema
helpers."""
