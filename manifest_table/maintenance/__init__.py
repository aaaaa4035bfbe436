"""The scheduled maintenance job (``job.py``): compaction, mirror sync and garbage collection
of one table or of every table under a root, run by ``manifest-table maintain`` and by
``gc/maintain.py``. The operations it runs live in ``operations/``."""
