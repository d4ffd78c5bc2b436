"""Across machines (sync, remote, handover, chains): the one layer that may import inbox."""
