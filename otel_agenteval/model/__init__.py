"""The data every stage speaks: tool steps and model calls, trajectories and conversations, violations
and the rule names, what an agent did after an error (recovery), a run's summary, and the forms of a
value that compare equal (normalisers).

Stage 1 of 6 (model → policy → reading → rules → engine → metrics): imports nothing of the package.
"""
