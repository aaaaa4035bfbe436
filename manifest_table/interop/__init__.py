"""Reading tables from other engines: DuckDB through its own Parquet reader, Polars through
an IO plugin. pandas and pyarrow need nothing here: ``Scan`` speaks the Arrow stream
protocol. duckdb and polars are optional (the ``interop`` extra) and imported on use."""
