"""What deploys Starling beyond one process: a generated compose testbed, and a PKI for mutual
TLS."""
