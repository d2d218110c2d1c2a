"""The help screen and the small modal dialogs: go to a time of a replay, send a signal to a process."""
