"""Storage-only transactional catalog: a lake-wide log of versions committed with put-if-absent."""
