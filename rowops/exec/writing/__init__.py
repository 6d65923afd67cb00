"""Writing files with Spark or pyarrow: data, position deletes, deletion vectors, equality deletes, and the encodings of a change."""
