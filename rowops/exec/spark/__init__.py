"""The Spark adapter: sessions, classic/Connect compatibility, schema and partition transforms, stats, listing, job errors."""
