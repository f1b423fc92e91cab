"""What people and tools read about a round: the rich round table, the progress bar, the
optional wandb log and each miner's verdict sent to it. Owns: ``table``, ``progress``, ``wandb_log``,
``verdicts``. May import: ``compute.store``, ``compute.transport`` (to tell miners) and the
validator's root modules. Reports decide nothing.
"""
