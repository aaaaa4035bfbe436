"""Mirrors: Iceberg v3 and Delta Lake descriptions of the same data files, written after our
commit point so that every engine can read the table (docs/mirrors.md).

Our versions stay the source of truth. A mirror is derived from them, may lag, and never
leads. ``sync.py`` decides what to write for which version and holds the hook the commit
path calls; ``change.py`` says what a version changed; ``iceberg.py`` (metadata files),
``iceberg_manifests.py`` (which manifests), ``iceberg_schema.py`` / ``iceberg_avro.py`` (their
entries and Avro) and ``puffin.py`` write Iceberg; ``delta.py`` and ``delta_dv.py`` write Delta;
``vectors.py`` frames our bitmaps as both formats' deletion vectors; ``columns.py`` gives many
files' statistics at once; ``types.py`` says which columns each format can hold; ``expiry.py``
tells garbage collection what mirrors need; ``source.py`` is what they all write through.

This module imports nothing: the format layer and the commit path import its parts."""
