"""The fault language of an experiment file: link, node and kernel faults, and how a schedule is
told."""
