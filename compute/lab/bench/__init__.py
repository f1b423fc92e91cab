"""One module per thing measured; each command's ``main`` is named in ``compute.lab.registry``."""
