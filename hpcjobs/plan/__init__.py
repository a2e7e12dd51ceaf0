"""Where and when a job would start: ``hpcjobs plan`` and ``--partition auto``.

For an experiment, one row per partition (and QOS) of its site: whether the request fits the limits
hpcjobs checks before submitting, Slurm's own start estimate (``sbatch --test-only``), the historical
queue wait of similar jobs on that partition, and the cost; then one recommendation by the rule in
:func:`hpcjobs.plan.rank.recommend`.

Modules (the scheduler's own answers, such as Slurm's ``sbatch --test-only`` in
:mod:`hpcjobs.schedulers.slurm.estimate`, are asked of its backend):
:mod:`~hpcjobs.plan.billing` (core-, GPU- and billing-hours, ``TRESBillingWeights``),
:mod:`~hpcjobs.plan.rank` (rows and the ranking rule), :mod:`~hpcjobs.plan.history` (queue wait of
similar jobs from cached accounting windows), :mod:`~hpcjobs.plan.advice_wait` (the same wait for the
request ``hpcjobs advise`` proposes vs the one the runs made; with ``history``, the modules that import
pandas), and :mod:`~hpcjobs.plan.api` (the library call behind the command).
"""
