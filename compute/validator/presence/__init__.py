"""Presence over time: cheap checks, at moments no miner can predict, of EVERY miner at once.

Owns: when a validator checks (``schedule``: a secrets-drawn exponential clock whose mean keeps all
validators' checks inside their share of the load budget), one check (``check``: every miner's
leases prepared, then every GPU's memory chain started at the window's one moment, verdicts on the
validator's clock) and the loop that runs them and logs the verdicts (``loop``). The credit they
feed (capacity x presence share) is pure math in ``compute.scoring.presence``. May import:
``round`` (the loop base), ``check``, ``context``, ``lockstep``, ``proofs``, ``rentals``, ``session``
and the validator's root modules.
"""
