"""The lab: benchmarks, simulators and fault harnesses, on the top floor above every product room.

A benchmark is a client of the room it measures, so it lives here and not in that room:
``bench/`` holds one module per thing measured, ``sim/`` the models that replay the validator's own
schedule and credit code at a scale no test runs, ``harness/`` the load and fault drivers (floods,
kill -9 loops, isolation probes) that benchmarks and tests share. ``registry`` names every command a
person runs (``python -m compute bench <name> [--json]``, or ``python -m compute.lab``).

No product module imports this package (``tests/test_layers.py`` holds that); ``localnet`` (the
demo) is a product and stays apart.
"""
