"""The worker side: claim a task, edit the shared tree, deliver a report, stop."""
