"""The terminal plumbing under the apps: partial output that sends only changed cells, the cells the terminal
shows, the pacing of draws, and the watchdog that exits when the terminal goes away."""
