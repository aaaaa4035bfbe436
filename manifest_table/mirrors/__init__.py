"""Mirrors: Iceberg v3 and Delta Lake descriptions of the same data files, written after our
commit point so that every engine can read the table (docs/mirrors.md).

Our versions stay the source of truth. A mirror is derived from them, may lag, and never
leads: ``sync.py`` decides what to write for which version; ``iceberg.py`` / ``iceberg_avro.py``
/ ``puffin.py`` write Iceberg's metadata, manifests and deletion vectors; ``delta.py`` /
``delta_dv.py`` write Delta's log, checkpoints and deletion vectors; ``types.py`` says which
columns each format can hold; ``expiry.py`` tells garbage collection what mirrors need.

This module imports nothing heavy: the format layer and the commit path import its parts."""
