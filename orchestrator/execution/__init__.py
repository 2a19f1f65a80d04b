"""Running a plan: backends, the node client, the supervisor and its fault plans, run, simulate,
collect."""
