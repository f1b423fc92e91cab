"""Multi-host miners: the hosts file (``config``), host checks (``check``) and the
``MultiHostBackend`` over one ``DockerBackend`` per host, which is also the manager's placement
(``backend``). May import: ``docker``, ``volumes``, ``lease``.
"""
