"""What the user asked for, as plain frozen data: no Spark, no I/O."""
