"""Table maintenance: compaction (fewer, cleaner files) and garbage collection (expired
versions and unreferenced objects). The scheduled job that runs both lives in ``gc/``."""

from .compaction import (CompactionGroup, commit_compaction, compact, plan_compaction, rewrite_group,
                         rewrite_record)
from .garbage_collection import GCReport, Tally, check_retention, collect_garbage

__all__ = ["CompactionGroup", "GCReport", "Tally", "check_retention", "collect_garbage", "commit_compaction",
           "compact", "plan_compaction", "rewrite_group", "rewrite_record"]
