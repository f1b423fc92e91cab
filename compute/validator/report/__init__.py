"""What people and tools read about a round: the rich round table, the progress bar and the
optional wandb log. Owns: ``table``, ``progress``, ``wandb_log``. May import: ``compute.store`` and the
validator's root modules. Reports decide nothing.
"""
