"""The fleet benchmark (``python -m compute.validator fleet-bench``): the real validator round against
a simulated subnet of N multi-GPU miners on one machine -- real signed HTTP, real SSH sessions, real
verification at production shapes -- answered by a benchmark-only prover told the openings in
advance (``prover.py`` says why a real validator can never meet it). ``cli`` parses, ``run`` drives
the round and reports, ``miners`` hosts the miners, ``leases`` serves their SSH sessions (``wire`` encodes
their lines), ``monitor`` watches the validator's process.
"""

from compute.validator.tools.fleet.cli import add_parser
from compute.validator.tools.fleet.cli import run as main

# not ``run``: importing the ``run`` submodule rebinds that name on this package to the module
__all__ = ["add_parser", "main"]
