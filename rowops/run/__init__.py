"""Running one operation end to end (plan, execute, commit, report): row-level operations, appends, maintenance, reads."""
