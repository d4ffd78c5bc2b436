"""A task's recorded work: recovery and checks."""
