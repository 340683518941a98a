"""The engine: one span at a time, route it to its run, extract it, queue it on the run's inbox,
check it (``dispatch`` → ``rules``), assemble it into the trajectory, finalise the run, hand the
finished trajectory to the sinks. The store bounds what is open; ``handoff`` is ``background=True``.

Stage 5 of 6: imports ``model``, ``policy``, ``reading``, ``rules``. Never imports ``metrics``:
what it counts is read at scrape time through ``self_stats``.
"""
