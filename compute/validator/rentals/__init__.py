"""Rental truth: renters' signed receipts and their endpoints (``receipts``), the validator's own
canary rental through the operator service (``canary``) with asks drawn like renters' (``shapes``),
the per-miner rental ledger (``ledger``) and the factors it applies to credit with what a test saw
(``truth``: ``MinerNotes``). May import: ``session``, the validator's root modules and the packages
below the validator (``compute.operator`` among them).
"""
