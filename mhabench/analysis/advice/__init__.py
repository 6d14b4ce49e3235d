"""``mhabench advise``: which implementation to run for each case, where the answer changes, and why.

Computation only, one statement kind per module (pick, crossover, why, change, caveats, across), each
statement a :class:`~mhabench.analysis.statement.Statement`: a reason code and the numbers it rests
on; the thresholds are in :mod:`~mhabench.analysis.advice.thresholds` and docs/advise.md. The sentences are
``mhabench.views.wording``'s, the layout ``mhabench.views.advice``'s.
"""
