"""Spark execution: the only package of rowops that imports pyspark."""
