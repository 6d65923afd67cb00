"""Iceberg metadata helpers on top of pyiceberg: table creation, live files, file statistics.

No Spark here: everything in this package works on metadata files only.
"""
