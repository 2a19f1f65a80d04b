"""What deploys Starling beyond one process: the files of a testbed for compose, Docker Swarm
or Kubernetes (one module per target over :mod:`.testbed`), and a PKI for mutual TLS."""
