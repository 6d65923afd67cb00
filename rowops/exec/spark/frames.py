"""pyspark's names that the layers above ``exec`` use (type hints, isinstance checks): they import
them from here, so that only ``rowops/exec`` imports pyspark (``tests/unit/test_layers.py``)."""

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import types as T

__all__ = ["Column", "DataFrame", "SparkSession", "T"]
