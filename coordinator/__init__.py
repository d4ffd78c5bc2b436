"""The coordinator side: assigns tasks, reads the inbox at safe checkpoints, commits."""
