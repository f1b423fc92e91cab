"""Rounds and weights over the whole subnet: which miners are tested when (``schedule``), the
periodic loops (``loop``: ``RoundLoop``, ``WeightsLoop``, ``LoopRunner``), chain block timing
(``timing``) and setting weights on chain (``weights``); the loops take the validator's ``context``.
May import: ``check``, ``context``, ``report``, ``fleet``, ``rentals`` and the validator's root modules.
"""
