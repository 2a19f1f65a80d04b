"""The experiment file: YAML read safely, its schema, and the frozen Experiment or Study it
describes."""
