"""The embedded rental backend: an in-process asyncssh server per lease for the local demo and
machines without Docker (``backend``), and the lease environment it builds (``lease_env``).
May import: ``lease``.
"""
