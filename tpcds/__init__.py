"""TPC-DS data for rowops benchmarks: ``store_sales`` generation and upsert batches for the paper's cases."""
