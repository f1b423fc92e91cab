"""The Docker rental backend: container spec (``spec``), files put into a container
(``container_files``), the tenant network policy (``netpolicy``), the templates (base images) a
miner offers (``templates``) and a second engine for multi-host tests (``second_engine``).
Nothing here imports the Docker SDK at package import. May import: ``volumes``, ``lease``.
"""
