"""The demo: simulated H100 servers that tell a story, for trying gputop without a GPU (``gputop --demo``).

- :mod:`~gputop.demo.scenarios`: the stories (jobs, workloads, faults) declared as data;
- :mod:`~gputop.demo.noise`: smooth, seeded noise, so values move like real data yet repeat for a seed;
- :mod:`~gputop.demo.source`: :class:`DemoSource`, which turns a scenario and the clock into snapshots;
- :mod:`~gputop.demo.prefill`: running a demo through its lead-in, so charts and advice start full;
- :mod:`~gputop.demo.frozen`: a demo whose clock stops, the same picture on every run (screenshots, tests).
"""
