"""The Maildir-style report inbox that workers deliver into and the coordinator reads."""

from .maildir import (
    MAX_REPORT_BYTES,
    Entry,
    Staged,
    adopt,
    archive,
    drop,
    entries,
    find_task_reports,
    link,
    publish,
    published,
    quarantine,
    read_report,
    reports_by_task,
    retire,
    stage,
    sweep_tmp,
    take,
    write_report,
)

__all__ = ["Entry", "MAX_REPORT_BYTES", "Staged", "adopt", "archive", "drop", "entries",
           "find_task_reports", "link", "publish", "published", "quarantine", "read_report", "reports_by_task",
           "retire", "stage", "sweep_tmp", "take", "write_report"]
