"""Every lease the validator was granted is released, even after its own crash or the miner's.

``JournaledClient`` is the validator's ``MinerClient`` with a lease journal (``compute.store.journal``):
each allocate is written down before it is sent and each release is confirmed. ``release_due`` is
one pass over what is still owed: failed releases, allocates whose answer was lost, and every lease
of an earlier run of this validator (a ``kill -9``); ``round.releases.ReleaseLoop`` runs it
periodically, so a miner that was killed mid-test gets its validation lease released once it is
back. Owns: ``client``, ``release``. May import: ``compute.transport``, ``compute.protocol``,
``compute.store``.
"""

from __future__ import annotations

from compute.validator.journal.client import JournaledClient, new_run_id
from compute.validator.journal.release import ReleasePass, release_due

__all__ = ["JournaledClient", "ReleasePass", "new_run_id", "release_due"]
