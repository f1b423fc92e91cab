"""Persistent volumes: the ``volumes`` table (``store``), the keeper's policy — ownership, one lease
at a time, caps, retention, adoption (``keeper``) — and the Docker volume driver (``driver``).
May import: ``lease``.
"""
