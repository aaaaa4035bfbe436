"""One module per user-visible operation, each built on a ``TableHandle`` (handle.py) and, for
those a transaction stages, on the staging protocol (``staging.py``): ``append``, ``delete``,
``overwrite``, ``update``, ``upsert``, ``schema_change``, ``upgrade``, ``set_mirrors``,
``create``, ``compaction`` and ``garbage_collection``."""
