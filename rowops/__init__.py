"""rowops: MERGE, UPDATE, DELETE and upsert on Apache Iceberg tables with PySpark.

>>> import rowops
>>> sorted(rowops.__all__)[:5]
['CardinalityViolationError', 'CommitConflictError', 'DEFAULT', 'HealthReport', 'Lakehouse']
"""

from __future__ import annotations

import logging

from rowops import errors
from rowops.errors import (
    CardinalityViolationError,
    CommitConflictError,
    RowOpsError,
    SchemaMismatchError,
    UnsupportedStrategyError,
)
from rowops.functions import delete, explain, merge, update
from rowops.lakehouse import Lakehouse
from rowops.request.operations import DEFAULT
from rowops.request.results import HealthReport, MaintenanceResult, OperationResult
from rowops.statements import sql
from rowops.table import MergeBuilder, Table
from rowops.transaction import Transaction

logging.getLogger("rowops").addHandler(logging.NullHandler())  # silent unless the application logs

__all__ = [
    "DEFAULT",
    "CardinalityViolationError",
    "CommitConflictError",
    "HealthReport",
    "Lakehouse",
    "MaintenanceResult",
    "MergeBuilder",
    "OperationResult",
    "RowOpsError",
    "SchemaMismatchError",
    "Table",
    "Transaction",
    "UnsupportedStrategyError",
    "delete",
    "errors",
    "explain",
    "merge",
    "sql",
    "update",
]
