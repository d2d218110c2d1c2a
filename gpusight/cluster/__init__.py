"""``gpusight --cluster``: a fleet of GPU nodes read from a Prometheus server."""
