"""Where and when a job would start: ``hpcjobs plan`` and ``--partition auto``.

For an experiment, one row per partition (and QOS) of its site: whether the request fits the limits
hpcjobs checks before submitting, Slurm's own start estimate (``sbatch --test-only``), the historical
queue wait of similar jobs on that partition, and the cost; then one recommendation by the rule in
:func:`hpcjobs.plan.rank.recommend`.

Modules: :mod:`~hpcjobs.plan.estimate` (the ``sbatch --test-only`` argv and its answer),
:mod:`~hpcjobs.plan.billing` (core-, GPU- and billing-hours, ``TRESBillingWeights``),
:mod:`~hpcjobs.plan.rank` (rows and the ranking rule), :mod:`~hpcjobs.plan.history` (queue wait of
similar jobs from cached accounting windows), :mod:`~hpcjobs.plan.advice_wait` (the same wait for the
request ``hpcjobs advise`` proposes vs the one the runs made; with ``history``, the modules that import
pandas), and :mod:`~hpcjobs.plan.api` (the library call behind the command).
"""
