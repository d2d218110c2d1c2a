"""The cluster app (``gpusight --cluster``): every node and GPU of a fleet read from Prometheus, and one host's screen.

A second Textual app, built on the shared widgets and terminal plumbing; its data comes from :mod:`gpusight.cluster`.
"""
