"""The fleet benchmark (``python -m compute bench fleet``): the real validator round against
a simulated subnet of N multi-GPU miners on one machine -- real signed HTTP, real SSH sessions, real
verification at production shapes -- answered by a benchmark-only prover told the openings in
advance (``prover.py`` says why a real validator can never meet it). ``cli`` parses, ``run`` drives
the round and reports, ``miners`` hosts the miners, ``leases`` serves their SSH sessions (``wire`` encodes
their lines), ``monitor`` watches the validator's process.
"""

from compute.lab.bench.fleet.cli import main

__all__ = ["main"]
