"""From an Experiment to plain data: every node's spec, the data plan, and the checks that need
them."""
