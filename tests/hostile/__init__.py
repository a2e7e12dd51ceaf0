"""Regression tests for hostile input, lying schedulers and crashes at random moments."""
