"""``mhabench advise``: which implementation to run for each case, where the answer changes, and why.

Computation only, one statement kind per module (pick, crossover, why, change, caveats, across), each
statement a :class:`~mhabench.analysis.advice.wording.Statement` that carries the rows it rests on and
each rule's support beside the rule; the thresholds are in :mod:`~mhabench.analysis.advice.thresholds` and
docs/advise.md. Rendering is ``mhabench.views.advice``.
"""
