"""Load and fault drivers shared by benchmarks and tests: connection floods, kill -9 loops, probes."""
