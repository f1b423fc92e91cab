"""Rental truth: renters' signed receipts and their endpoints (``receipts``), the validator's own
canary rental (``canary``), the per-miner rental ledger (``ledger``) and the factors it applies to
credit with what a test saw (``truth``: ``MinerNotes``). May import: ``session`` and the validator's
root modules.
"""
