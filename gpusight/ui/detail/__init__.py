"""The detail screens: one GPU's charts and hardware (Enter or ``g``), and one process's (Enter on a process)."""
