"""The fleet view across miners: device fingerprints, hotkeys that share hardware and credit-once
(``dedup``), and the round's oversight over every result (``oversight``). Pure over results and notes;
no network. May import: ``rentals`` and the validator's root modules.
"""
