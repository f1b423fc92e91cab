"""The lease lifecycle over any backend: the ``AllocationManager`` (allocate, extend, key exchange,
restart, release, expiry), reconcile at start (``reconcile``), lease health and restarts
(``health``), the multi-host watch (``hostwatch``) and the disk and idle watches (the kill -9
harnesses that exercise it live in ``compute.lab.harness``).
The top room of allocation: may import every other room.
"""
