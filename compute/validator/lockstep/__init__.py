"""The lockstep window: every timed proof of a window (every miner, every GPU and host) at one moment.

Owns: the window's barrier on the validator's clock (``window``: seats prepare untimed, then build,
then every memory chain starts at the window's common moment) and the exclusivity judge
(``residency``: each GPU's residency interval must contain that moment). A seat that is not ready
when a gate falls is absent for the window (it may only lose). Used by one miner's test (``check``),
the round (``round``) and the presence checks (``presence``). May import: ``proofs``, ``session``
and the validator's root modules.
"""
