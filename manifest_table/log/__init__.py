"""A table's version log: the pointer and the manifests it leads to (``version_log.py``), a
version bound to the segment reader it is read through (``version.py``: its files, the entries
of given paths, what a successor changed), and the segment cache (``segments.py``)."""
