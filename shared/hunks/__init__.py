"""Bytes in, owners out: -U0 parsing, placements, snapshots, ownership, the task view,
commit plans."""
