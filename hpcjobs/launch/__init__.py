"""Distributed launch, preemption and in-job GPU sampling.

An experiment's optional ``launch:`` section (:class:`hpcjobs.config.experiment.Launch`) is resolved
against the site's ``distributed:`` and ``preemption:`` sections into
:class:`hpcjobs.launch.settings.LaunchSettings` (``ResolvedJob.launch``), which the templates in
``templates/launch/`` turn into bash. :mod:`hpcjobs.launch.builders` holds the pure reference
versions of what that bash computes (port, hosts, hostfile, ``TF_CONFIG``).

Launchers (``launch.launcher``; ``launch.program`` + ``launch.args`` are what it starts, quoted):

* ``torchrun``: one launcher per node (Slurm: ``srun --ntasks-per-node=1``; PBS/Torque: ``pbsdsh -n
  <first slot of each host>`` or, with ``distributed.node_launcher: mpiexec``, ``mpiexec -n <nodes>
  --ppn 1``; local: directly), ``--nnodes``, ``--nproc-per-node`` (GPUs per node, else tasks per
  node), ``--node-rank``, c10d rendezvous at the first host and the job's port.
* ``deepspeed``: a hostfile (``host slots=N``) of the job's hosts, the launcher started once on the
  first node with ``--master_addr``/``--master_port`` (it reaches the other nodes itself: pdsh by
  default, ``launch.deepspeed_launcher`` otherwise).
* ``tf``: one worker per task (``srun`` / ``mpiexec``), each with its ``TF_CONFIG`` built from the
  host list and its rank (``SLURM_PROCID``, ``PMIX_RANK``, ``PMI_RANK``, ``OMPI_COMM_WORLD_RANK``,
  ``PALS_RANKID``); tasks on one host get consecutive ports.
* ``mpi``: ``srun --ntasks=<nodes×tasks> --ntasks-per-node=<tasks> --cpus-per-task=<cpus>``;
  off Slurm ``mpiexec -n <nodes×tasks> --ppn <tasks>`` (``mpi_flavour: openmpi``: ``--map-by
  ppr:<tasks>:node:PE=<cpus>``). ``srun``: the same, Slurm only.

Hosts: Slurm ``scontrol show hostnames "$SLURM_JOB_NODELIST"``; PBS/Torque ``$PBS_NODEFILE``
de-duplicated in file order (its first line is the mother superior). Tasks started by ``pbsdsh``
or ``mpiexec`` on PBS get the job's exported environment from a file (mode 600) under
``<output_dir>/<name>-<jobid>.launch/``, since the PBS task manager does not pass it on.

Rendezvous port: ``port_base + (job number mod port_span)`` (site ``distributed``, default
20000 + n mod 10000; ``launch.rdzv_port_base`` overrides the base). The job number is the job id's
digits before the first ``.``, the last 9 at most. Every node computes the same port; it stays
below Linux's ephemeral range (32768-60999).

Binding: ``CUDA_VISIBLE_DEVICES`` is left to the scheduler; ``OMP_NUM_THREADS`` follows
``cpus_per_task``; the site's ``distributed.environment`` (``NCCL_SOCKET_IFNAME``,
``NCCL_IB_HCA``, ...) and ``distributed.modules`` (CUDA, cuDNN, NCCL) apply to jobs with GPUs or
a launcher.

Preemption (``launch.preemptible``): Slurm gets ``--signal=B:<SIG>@<N> --requeue
--open-mode=append``; PBS/Torque/local jobs signal themselves from a timer (wall time − N seconds
after the script starts). On the signal the batch shell sends it to the program's process group
(a launcher such as torchrun runs with it ignored, so its workers get it and it survives), waits
at most N/2 s, then TERMs it (on PBS/Torque the launchers started by ``pbsdsh``/``mpiexec``
ignore the signal and the batch script fans it out through ``pbsdsh`` to each node's torchrun
group, whose id each node records under the launch directory; for ``tf``/``mpi`` jobs there the
signal reaches the local ``mpiexec`` only, which may or may not forward it), runs
``launch.checkpoint_command``, then requeues: Slurm ``scontrol
requeue`` while ``SLURM_RESTART_COUNT`` < ``max_requeues``; PBS/Torque ``qrerun`` when the site's
``preemption.pbs_requeue`` is ``qrerun`` (a counter file caps it). Otherwise the job exits with
``preemption.requeue_exit_code`` (default 75, EX_TEMPFAIL): "stopped with a checkpoint,
resubmit to continue", for the sweep ledger. SIGTERM (scancel, time limit) is forwarded and
checkpointed too, then the job exits 143 without a requeue. Measured on the Slurm 22.05 testbed:
slurmctld sends the signal from its 30-s limit loop as soon as fewer than N + 30 s remain (never
late, up to 30 s early), and a requeued job becomes eligible 121 s after the requeue.

GPU sampler (``launch.gpu_sampler``): on the first node, ``nvidia-smi --query-gpu=timestamp,index,
uuid,utilization.gpu,utilization.memory,memory.used,memory.total,power.draw --format=csv,nounits
-l <interval>`` appended to ``<output_dir>/<name>-<jobid>.gpu.csv`` (a requeued run appends, header
included), stopped when the script exits; without ``nvidia-smi`` nothing runs and nothing is written.
"""
