"""Collateral in the validator (docs/collateral.md): the credit factor of each miner's deposit
(``credit``), and the desk that makes renters whole — renters' lease reports and the validator's
own probes of them (``probing``), evidence assembled, served (``book``, ``surface``), exchanged with
other validators (``peers``), checked and attested on the contract (``judging``; a cheat only when
this validator's own round proved it by mathematics, ``cheats``), driven by one loop (``desk``).
Off unless ``--collateral.rpc`` is set. May import: ``round`` (the loop base and the weights'
credit factors), ``session`` (the SSH probe) and the validator's root modules.
"""
