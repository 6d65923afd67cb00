"""The row changes of an operation as DataFrames: the MERGE join, each row's action, their summary, change feeds."""
