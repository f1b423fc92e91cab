"""The validator's channel into a lease: the SSH session that bootstraps and drives the PoG worker
(JSON lines, bounded reply parsing) and the host-key probe of an SSH endpoint.

Owns: ``pog_session`` (PogSession and its errors), ``worker_reply`` (parsing what the worker says),
``sshprobe`` (does an endpoint answer with a given host key). May import: ``compute.pog``,
``compute.protocol`` and the validator's root modules. Knows nothing of rounds, scores or rentals.
"""
