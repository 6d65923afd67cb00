"""Checks of an operation before and while it runs: columns, expressions, store assignment, NOT NULL, cardinality."""
