"""Accounting: what the scheduler recorded, as typed pandas DataFrames, and reports on it.

Importing this package imports pandas; the CLI imports it only inside the
commands that need it.
"""
