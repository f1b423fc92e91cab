"""The proofs the validator runs inside one validation lease, over an open ``PogSession``: the GEMM
proof (``sizing``, ``gemm``), memory, scaling, sustained and host proofs (``depth``, ``depth_step``),
the combination of a multi-host miner's hosts (``hostproof``) and the scored result (``evidence``).
A step takes the test it runs in as one ``ProofCheck`` (``checked``: round parameters, GPU table,
previous result). They never talk to the miner's API. May import: ``session``, ``fleet``,
``rentals`` and the validator's root modules.
"""
