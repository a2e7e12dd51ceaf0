"""The Slurm backend: ``sbatch``/``sacct``/``squeue``/``scancel``/``scontrol`` command builders and parsers.

The parsers live in :mod:`hpcjobs.schedulers.slurm.formats` (pure, tested on real output of
Slurm 22.05); this module assembles them behind :class:`SchedulerBackend`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from hpcjobs.config.discover_model import DiscoveredSite, DiscoveryRun, Probe
from hpcjobs.config.policy import slurm_exports_environment
from hpcjobs.schedulers.base import BaseBackend, Capabilities, ClusterLimits, Directive, JobStatus, SubmitOptions
from hpcjobs.schedulers.estimates import StartEstimate
from hpcjobs.schedulers.slurm import containers, discover_live, estimate
from hpcjobs.schedulers.slurm import formats as fmt
from hpcjobs.schedulers.slurm.directives import array_argument, slurm_directives
from hpcjobs.schedulers.status_table import StatusTable

if TYPE_CHECKING:
    from hpcjobs.config.container import ResolvedContainer, Word
    from hpcjobs.config.site import SiteConfig
    from hpcjobs.resolve import ResolvedJob
    from hpcjobs.schedulers.pending import PendingQuery, QueryRun

#: Messages with which sacct says accounting is unavailable (then status falls back to squeue).
ACCOUNTING_UNAVAILABLE = (
    "accounting storage is disabled",
    "slurmdbd: Connection refused",
    "Problem talking to the database",
    "Unable to get",
)

#: A Slurm job id as hpcjobs passes it on: the job (``123``), an array task (``123_4``) or range
#: (``123_[1-5]``, ``123_[1,3-5%2]``), a het job component (``123+1``). No step, no cluster.
JOB_ID_RE = re.compile(r"[0-9]{1,20}(?:_(?:[0-9]{1,10}|\[[0-9][0-9,:%-]{0,200}\]))?(?:\+[0-9]{1,10})?")


def slurm_dependency(options: SubmitOptions) -> str:
    """``--dependency`` value: ``afterok:1:2,afterany:3`` (a comma: all of them; sbatch(1)), or ``""``.

    An array job's id stands for all its tasks (``afterok:123`` waits for ``123_*``).
    """
    groups = [("ok", tuple(options.dependencies))] if options.dependencies else []
    groups += [(d.condition, d.job_ids) for d in options.after if d.job_ids]
    return ",".join(f"after{cond}:" + ":".join(SlurmBackend().check_job_ids(ids)) for cond, ids in groups)


#: sbatch short options and the long option each stands for (sbatch man page, OPTIONS).
SBATCH_SHORT_OPTIONS: Mapping[str, str] = MappingProxyType({
    "A": "account", "a": "array", "B": "extra-node-info", "b": "begin", "C": "constraint", "c": "cpus-per-task",
    "D": "chdir", "d": "dependency", "e": "error", "F": "nodefile", "G": "gpus", "H": "hold", "i": "input",
    "J": "job-name", "k": "no-kill", "L": "licenses", "M": "clusters", "m": "distribution", "N": "nodes",
    "n": "ntasks", "O": "overcommit", "o": "output", "p": "partition", "q": "qos", "Q": "quiet",
    "s": "oversubscribe", "S": "core-spec", "t": "time", "V": "version", "v": "verbose", "W": "wait",
    "w": "nodelist", "x": "exclude",
})


class SlurmBackend(BaseBackend):
    """Slurm commands and output parsers.

    Every job id is checked (:meth:`check_job_ids`) before it goes into an argv: ``sacct``/``squeue``
    get them as the value of ``--jobs=`` and ``sbatch`` in ``--dependency=``, one word with its option;
    ``scancel`` as operands after ``--`` (scancel reads options with getopt_long, which stops at ``--``).
    """

    name = "slurm"
    #: fallback_for_missing: ids the status call does not know may be too new for accounting: squeue answers.
    capabilities = Capabilities(packing=True, dependencies=True, columnar_status=True, status_fallback=True,
                                fallback_for_missing=True, cluster_limits=True, user_limits=True, qos_limits=True,
                                queued_count=True, failed_upstream="blocked", start_estimate=True, mail=True,
                                walltime_signal=True, discoverable=True,
                                usage_accounting=True,
                                container_runtimes=frozenset({"apptainer", "singularity", "podman", "pyxis", "oci"}),
                                step_container_runtimes=frozenset({"pyxis", "oci"}), explains_pending=True)
    directive_prefix = "#SBATCH"
    array_index_var = "SLURM_ARRAY_TASK_ID"
    job_id_var = "SLURM_JOB_ID"
    job_id_what = "Slurm job id"
    job_id_pattern = JOB_ID_RE
    job_id_grammar = "digits, optionally with an array task or range and a het component: 123, 123_4, 123_[1-5], 123+1"

    def submit_argv(self, script: Path, options: SubmitOptions) -> list[str]:
        """``sbatch --parsable`` with the options as arguments (they override the script's directives)."""
        argv = ["sbatch", "--parsable"]
        if options.array is not None:
            argv.append("--array=" + array_argument(options.array))
        dependency = slurm_dependency(options)
        if dependency:
            argv.append("--dependency=" + dependency)
        if options.job_name:
            argv.append("--job-name=" + options.job_name)
        if options.comment:
            argv.append("--comment=" + options.comment)
        if options.hold:
            argv.append("--hold")
        argv.extend(options.extra_args)
        argv.append(str(script))
        return argv

    def parse_submit(self, stdout: str) -> str:
        """The job id from ``sbatch --parsable`` (``123`` or ``123;cluster``)."""
        job_id, _cluster = fmt.parse_submit_output(stdout)
        return job_id

    def status_argv(self, job_ids: Sequence[str]) -> list[str]:
        """One ``sacct`` call for every job (array ids cover all their tasks)."""
        return fmt.sacct_status_argv(self.check_job_ids(job_ids))

    def parse_status(self, stdout: str) -> list[JobStatus]:
        """Records of :meth:`status_argv` output, one per job or array task."""
        return fmt.parse_sacct_status(stdout)

    def parse_status_table(self, stdout: str) -> StatusTable:
        """:meth:`parse_status` by column, for sweeps of many array tasks (:mod:`hpcjobs.schedulers.slurm.bulk`)."""
        from hpcjobs.schedulers.slurm.bulk import sacct_status_table

        return sacct_status_table(stdout)

    def fallback_status_argv(self, job_ids: Sequence[str]) -> list[str]:
        """``squeue`` for clusters without accounting (knows jobs until ``MinJobAge`` after they end)."""
        return fmt.squeue_status_argv(self.check_job_ids(job_ids))

    def parse_fallback_status(self, stdout: str) -> list[JobStatus]:
        """Records of :meth:`fallback_status_argv` output."""
        return fmt.parse_squeue_status(stdout)

    def accounting_unavailable(self, stderr: str) -> bool:
        """Whether a failed status call means "no accounting here" (so the fallback should be used)."""
        return any(msg.lower() in stderr.lower() for msg in ACCOUNTING_UNAVAILABLE)

    def tolerable_status_error(self, stderr: str) -> bool:
        """``squeue --jobs=ID`` of one job it no longer knows exits 1 ("Invalid job id specified").

        With several ids it exits 0 and lists the ones it knows; with one, the exit is the answer
        "none of them" (seen on Slurm 22.05).
        """
        return "invalid job id specified" in stderr.lower()

    def accounting_disabled(self, stderr: str) -> bool:
        """Whether a failed ``sacct`` says this cluster keeps no accounting (not that slurmdbd is down).

        Only then is ``squeue`` the whole truth about the user's jobs; any other failure of ``sacct``
        leaves finished jobs unaccounted for.
        """
        return "accounting storage is disabled" in stderr.lower()

    def history_backlog_argv(self) -> list[str] | None:
        """``sdiag``: its "DBD Agent queue size" counts the records slurmctld has not yet sent to slurmdbd.

        Right after an accounting outage ``sacct`` answers before slurmctld has sent what it kept (a job
        purged from ``squeue`` meanwhile is then in neither): seen on Slurm 22.05, 1-2 s with 5 records.
        """
        return ["sdiag"]

    def parse_history_backlog(self, stdout: str) -> int | None:
        """The number after ``DBD Agent queue size:``; ``None`` when the line is not there."""
        return fmt.parse_dbd_agent_queue(stdout)

    def cancel_argv(self, job_ids: Sequence[str]) -> list[str]:
        """``scancel -- IDS``: all ``job_ids`` in one call (``--``: none of them is read as an option)."""
        return ["scancel", "--", *self.check_job_ids(job_ids)]

    def config_argv(self) -> list[str]:
        """``scontrol show config`` (cluster name and limits)."""
        return ["scontrol", "show", "config"]

    def parse_limits(self, stdout: str) -> ClusterLimits:
        """MaxArraySize, MaxJobCount and MinJobAge from ``scontrol show config``."""
        return fmt.cluster_limits_from_config(fmt.parse_scontrol_show_config(stdout))

    def parse_cluster_name(self, stdout: str) -> str | None:
        """ClusterName from ``scontrol show config``."""
        return fmt.parse_scontrol_show_config(stdout).get("ClusterName") or None

    def user_limits_argv(self, user: str) -> list[str]:
        """``sacctmgr`` query of the user's associations: their submit limits and QOS."""
        # ``where`` and each condition are separate words: sacctmgr reads "where user=x" given as one
        # argument as an unknown condition and exits 1.
        return ["sacctmgr", "--noheader", "--parsable2", "show", "associations", "where", f"user={user}",
                "format=Cluster,Account,Partition,MaxSubmitJobs,GrpSubmitJobs,DefaultQOS,QOS"]

    def qos_limits_argv(self) -> list[str]:
        """``sacctmgr`` query of every QOS's per-user submit limit."""
        return ["sacctmgr", "--noheader", "--parsable2", "show", "qos", "format=Name,MaxSubmitJobsPerUser"]

    def parse_qos_limits(self, stdout: str) -> dict[str, int]:
        """``{qos: MaxSubmitJobsPerUser}`` of the QOS that set one."""
        out: dict[str, int] = {}
        for line in stdout.splitlines():
            name, _, value = line.partition("|")
            value = value.split("|", 1)[0].strip()
            if name.strip() and re.fullmatch(r"\d+", value):
                out[name.strip()] = int(value)
        return out

    def parse_user_limits(self, stdout: str, qos_limits: Mapping[str, int] | None = None) -> int | None:
        """The tightest submit limit among the user's associations and their QOS (``None`` when unlimited).

        An association's jobs run under its ``DefaultQOS`` (else ``normal`` when the association may use
        it, else its first allowed QOS); that QOS's ``MaxSubmitJobsPerUser`` counts as well as the
        association's own ``MaxSubmitJobs`` and ``GrpSubmitJobs``.
        """
        limits = []
        for line in stdout.splitlines():
            parts = line.split("|")
            for value in parts[3:5]:
                if re.fullmatch(r"\d+", value.strip()):
                    limits.append(int(value))
            if qos_limits and len(parts) >= 7:
                allowed = [q.strip() for q in parts[6].split(",") if q.strip()]
                default = parts[5].strip() or ("normal" if "normal" in allowed or not allowed else allowed[0])
                if default in qos_limits:
                    limits.append(qos_limits[default])
        return min(limits) if limits else None

    def tag_query_argvs(self, name: str, user: str) -> list[list[str]]:
        """Calls that list the user's jobs called ``name`` with their comments (live ones, then finished).

        Used to find out whether a submission whose answer was lost did reach the scheduler.
        ``squeue`` knows a job from the moment it is queued; ``sacct`` knows it after it leaves
        ``squeue`` (``MinJobAge``), with a lag of a few seconds at submission.
        """
        return [
            ["squeue", "--noheader", "--states=all", f"--user={user}", f"--name={name}", "--format=%F|%k"],
            ["sacct", "--noheader", "--parsable2", "-X", f"--user={user}", f"--name={name}",
             "--starttime=now-14days", "--format=JobID,Comment"],
        ]

    def parse_tag_query(self, stdout: str) -> list[tuple[str, str]]:
        """``(job id, comment)`` pairs from :meth:`tag_query_argvs` output; array tasks give their array id."""
        out: list[tuple[str, str]] = []
        for line in stdout.splitlines():
            if "|" not in line:
                continue
            job, comment = line.split("|", 1)
            job = job.strip()
            if not job:
                continue
            try:
                base = fmt.parse_job_id(job).base_id
            except Exception:
                continue
            out.append((base, comment.strip()))
        return out

    def queued_argv(self, user: str) -> list[str]:
        """Every queued or running job and array task of ``user``, one per line (for submit limits)."""
        return ["squeue", "--noheader", "--array", f"--user={user}",
                "--states=PENDING,RUNNING,SUSPENDED,CONFIGURING,COMPLETING,REQUEUED", "--format=%i"]

    def parse_queued(self, stdout: str) -> int:
        """How many jobs/tasks :meth:`queued_argv` listed."""
        return sum(1 for line in stdout.splitlines() if line.strip())

    # --- accounting and plan hooks ---

    live_accounting_source = "sacct"
    plans_partitions = True
    wait_history_source = "sacct"
    wait_history_words = "jobs started in the last {days} days (sacct)"
    billing_without_weights = "the partition has no TRESBillingWeights in the site file: billed as its CPUs"
    start_estimate_env = MappingProxyType(estimate.WILL_RUN_ENV)

    def start_estimate_argv(self, script: Path, partition: str, qos: str | None) -> list[str]:
        """``sbatch --test-only --partition=P [--qos=Q] SCRIPT`` (:func:`.estimate.will_run_argv`)."""
        return estimate.will_run_argv(script, partition, qos)

    def parse_start_estimate(self, stderr: str, returncode: int) -> StartEstimate:
        """Slurm's answer on stderr (:func:`.estimate.parse_will_run`)."""
        return estimate.parse_will_run(stderr, returncode)

    # --- sweep hooks ---

    submitit_cluster = "slurm"

    def submitit_parameters(self, job: ResolvedJob, params: dict[str, Any]) -> dict[str, Any]:
        """The generic parameters with the job's partition, account, QOS, typed GPUs (``--gres``) and the
        site's environment (``slurm_setup``)."""
        if job.scheduler_partition:
            params["slurm_partition"] = job.scheduler_partition
        if job.account:
            params["slurm_account"] = job.account
        if job.qos:
            params["slurm_qos"] = job.qos
        if job.gpus_per_node and job.gpu_type:
            params.pop("gpus_per_node")
            params["slurm_gres"] = f"gpu:{job.gpu_type}:{job.gpus_per_node}"
        if job.site.environment:
            params["slurm_setup"] = [f"export {k}={v!r}" for k, v in job.site.environment.items()]
        return params

    def submitit_chunk_parameters(self, tag: str) -> dict[str, Any]:
        """The tag in the job's comment (``--comment``), where hpcjobs looks for it."""
        return {"slurm_comment": tag}

    def single_log_stem(self, name: str, job_id: str) -> str:
        """``<name>-<job id>`` (``--output=<output_dir>/%x-%j.out``)."""
        return f"{name}-{job_id.split('.')[0]}"

    def array_log_stem(self, base: Path, name: str, sweep_id: str, chunk: int | None, array_job_id: str | None,
                       array_index: int) -> Path | None:
        """``<name>-<array job>_<index>`` (``%x-%A_%a``)."""
        return base / f"{name}-{array_job_id}_{array_index}" if array_job_id else None

    def tag_query_hint(self, name: str) -> str:
        """``squeue`` for the queued jobs, ``sacct`` for those that left the queue."""
        return (f"squeue --me --name={name} --format=%F|%k (and sacct -X --name={name} "
                "--format=JobID,Comment,State)")

    # --- render hooks ---

    launchers = frozenset({"srun"})

    def container_step_options(self, container: ResolvedContainer, *, standalone: bool = False) -> tuple[Word, ...]:
        """``srun`` options of a step in a Pyxis or OCI container (:mod:`hpcjobs.schedulers.slurm.containers`)."""
        if container.runtime == "pyxis":
            options = containers.pyxis_options(container)
        elif container.runtime == "oci":
            options = containers.oci_options(container)
        else:
            return super().container_step_options(container, standalone=standalone)
        return (*containers.ONE_TASK_STEP, *options) if standalone else options

    def explain_pending(self, job_ids: Sequence[str], run: QueryRun) -> PendingQuery:
        """``squeue``, ``sprio``, ``sshare`` (and for limit reasons ``sacctmgr``) (:mod:`.why`)."""
        from hpcjobs.schedulers.slurm.why import explain_pending

        return explain_pending(self.check_job_ids(job_ids), run)

    def container_pull_command(self, container: ResolvedContainer) -> tuple[Word, ...]:
        """``enroot import --output FILE docker://[REGISTRY#]IMAGE``: a Pyxis image as a ``.sqsh`` file."""
        if container.runtime != "pyxis":
            return super().container_pull_command(container)
        return containers.pyxis_import(container)

    def directives(self, job: ResolvedJob) -> list[Directive]:
        """``#SBATCH`` options (:func:`hpcjobs.schedulers.slurm.directives.slurm_directives`)."""
        return slurm_directives(job)

    def env_secret_problem(self, site: SiteConfig, directives: Sequence[str]) -> str | None:
        """sbatch passes the submitter's environment unless an ``--export`` directive says otherwise."""
        del site
        if slurm_exports_environment(directives):
            return None
        return ("an --export directive stops sbatch passing the submitter's environment to the job, so this "
                "secret would not arrive; use `file:` or --export=ALL")

    # --- site hooks ---

    display_name = "Slurm"
    probe_hint = "scontrol show config"
    site_fields = MappingProxyType({"qos_limits": "Slurm QOS limits"})
    short_options = SBATCH_SHORT_OPTIONS

    def probe(self, run: DiscoveryRun, timeout: float) -> Probe | None:
        """The cluster when ``scontrol show config`` answers (``sbatch`` and ``scontrol`` on ``PATH``)."""
        cluster = discover_live.probe_cluster(run, timeout)
        return None if cluster is None else Probe(self.name, cluster)

    def discover_site(self, run: DiscoveryRun, name: str | None, user: str) -> DiscoveredSite:
        """Partitions and nodes from ``scontrol``, ``user``'s submit and QOS limits from ``sacctmgr``."""
        return discover_live.discover_site(run, name=name, user=user)
