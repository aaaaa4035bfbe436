"""The data plane: reading a snapshot (``scan.py`` over ``file_sets.py``), writing Parquet data
files (``write.py``, fed by ``ingest.py``), tombstone objects (``tombstones.py``), and the plan
of Parquet files and deleted rows that DuckDB, Spark and Polars read by themselves
(``parquet_plan.py``)."""
