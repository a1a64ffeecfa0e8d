"""Where an attempt runs: the `Executor` contract, this machine's jail, hoh's egress proxy and Harbor's
environments (the map: README.md). Harbor is imported only when an environment other than `local` is asked for;
nothing is imported here, so `egress/shim.py` runs with the standard library alone."""
