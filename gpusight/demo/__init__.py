"""The demo: simulated H100 servers that tell a story, for trying gpusight without a GPU (``gpusight --demo``).

- :mod:`~gpusight.demo.scenarios`: the stories (jobs, workloads, faults) declared as data;
- :mod:`~gpusight.demo.noise`: smooth, seeded noise, so values move like real data yet repeat for a seed;
- :mod:`~gpusight.demo.source`: :class:`DemoSource`, which turns a scenario and the clock into snapshots;
- :mod:`~gpusight.demo.prefill`: running a demo through its lead-in, so charts and advice start full;
- :mod:`~gpusight.demo.frozen`: a demo whose clock stops, the same picture on every run (screenshots, tests).
"""
