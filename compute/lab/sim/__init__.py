"""Simulators that run the validator's own schedule and credit code over many validators and days."""
