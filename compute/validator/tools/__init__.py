"""Commands for validator operators and developers, above everything else in the validator:
``agreement`` (agreement-sim), ``check_cost`` (check-cost) and ``bench`` (bench-validator).
May import any room of the validator.
"""
