"""Copy-on-write rewrites of data files: in Arrow inside Spark tasks, by key without a join, and for maintenance."""
