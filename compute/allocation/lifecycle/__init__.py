"""The lease lifecycle over any backend: the ``AllocationManager`` (allocate, extend, key exchange,
restart, release, expiry), reconcile at start (``reconcile``), lease health and restarts
(``health``), the multi-host watch (``hostwatch``) and the kill -9 harness (``crashloop``).
The top room of allocation: may import every other room.
"""
