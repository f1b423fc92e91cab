"""What a lease is and where it is kept: the values (``records``), the ``Backend`` interface every
rental backend implements (``backend``), the SQLite lease store (``store``), how backend errors map to
protocol refusals (``failures``), SSH key checks (``sshkeys``), port helpers (``ports``) and atomic
file writes (``atomic``). The bottom room: imports only compute's root modules.
"""
