"""The on-storage format: manifests, the pointer, schemas and column statistics.
Every object is described in docs/format.md."""
