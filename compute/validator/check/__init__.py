"""One miner's test in a round. ``MinerCheck`` (``context``) is the test: who is tested, with what
client, under which round's parameters, with which previous result and notes; every step takes it.
Owns: the validation lease (``lease``), the single-machine proof in a lease (``prove``), the steps
in order (``miner.check_miner``), the multi-host path (``hosts``) and the rented path (``rented``).
May import: ``lockstep``, ``proofs``, ``fleet``, ``rentals``, ``session`` and the validator's root modules.
"""
