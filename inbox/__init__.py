"""The Maildir-style report inbox that workers deliver into and the coordinator reads."""

from .maildir import (
    MAX_REPORT_BYTES,
    Entry,
    archive,
    deliver,
    entries,
    find_task_reports,
    quarantine,
    read_report,
    reports_by_task,
    retire,
    sweep_tmp,
    take,
)

__all__ = ["Entry", "MAX_REPORT_BYTES", "archive", "deliver", "entries", "find_task_reports",
           "quarantine", "read_report", "reports_by_task", "retire", "sweep_tmp", "take"]
