"""The user's requests (and their results) as plain frozen data: no Spark, no I/O."""
