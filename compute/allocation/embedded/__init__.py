"""The embedded rental backend: an in-process asyncssh server per lease for the local demo and
machines without Docker (``backend``), the lease environment it builds (``lease_env``) and the
pacing that makes a demo miner answer as a slower machine (``pace``).
May import: ``lease``.
"""
