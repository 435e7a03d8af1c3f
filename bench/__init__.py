"""Benchmark commands: each prints a table (`python -m bench.<name>`); none of them is a test."""
