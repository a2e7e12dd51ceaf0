"""PBS Pro / OpenPBS and Torque backends: ``qsub``/``qstat``/``qdel`` builders and parsers.

The parsers live in :mod:`hpcjobs.schedulers.pbs.formats` and :mod:`hpcjobs.schedulers.pbs.torque`
(pure, tested on real recorded output); this module assembles them.

The hpcjobs tag travels as ``-v HPCJOBS_TAG=<tag>`` (PBS has no free-text job
comment a user can set), which qstat reports in ``Variable_List``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from hpcjobs.config.discover_model import DiscoveredSite, DiscoveryRun, Probe
from hpcjobs.schedulers.base import (
    ArraySpec,
    BaseBackend,
    Capabilities,
    ClusterLimits,
    Directive,
    JobStatus,
    SubmitOptions,
)
from hpcjobs.schedulers.estimates import QueueState
from hpcjobs.schedulers.locate import locate_pbs_command
from hpcjobs.schedulers.pbs import discover_live, queues
from hpcjobs.schedulers.pbs import formats as fmt
from hpcjobs.schedulers.pbs import torque as tfmt
from hpcjobs.schedulers.pbs.directives import (
    pbs_array_argument,
    pbspro_directives,
    torque_array_argument,
    torque_directives,
)
from hpcjobs.schedulers.pbs.exit_codes import PBS_EXEC_CODES, TORQUE_EXEC_CODES
from hpcjobs.units import format_memory_pbs, is_ascii_digits

if TYPE_CHECKING:
    from hpcjobs.config.site import SiteConfig
    from hpcjobs.resolve import ResolvedJob
    from hpcjobs.schedulers.pending import PendingQuery, QueryRun

#: A PBS (and Torque) job id: the sequence number, an array (``123[]``), subjob (``123[4]``) or subjob
#: range (``123[1-5]``, ``123[1-9:2]``), then the server's name when given (``123.server``, ``123[].srv.org``).
JOB_ID_RE = re.compile(r"[0-9]{1,20}(?:\[(?:[0-9]{1,10}(?:-[0-9]{1,10}(?::[0-9]{1,10})?)?)?\])?"
                       r"(?:\.[A-Za-z0-9_][A-Za-z0-9_-]{0,62}){0,16}")


class PbsProBackend(BaseBackend):
    """PBS Pro / OpenPBS commands and output parsers.

    Every job id is checked (:meth:`check_job_ids`) before it goes into an argv, and ``qstat``/``qdel``
    get them as operands after ``--`` (both read options with getopt(3), which stops there).
    """

    name = "pbspro"
    capabilities = Capabilities(packing=True, dependencies=True, status_fallback=True, cluster_limits=True,
                                job_ids_as_text=False, command_paths=True, failed_upstream="deleted",
                                queue_states=True, mail=True,
                                discoverable=True, usage_accounting=True,
                                container_runtimes=frozenset({"apptainer", "singularity", "podman"}),
                                explains_pending=True)
    directive_prefix = "#PBS"
    array_index_var = "PBS_ARRAY_INDEX"
    job_id_var = "PBS_JOBID"
    job_id_what = "PBS job id"
    job_id_pattern = JOB_ID_RE
    job_id_grammar = "digits, optionally [], [N] or [N-M], then the server: 123.server, 123[].server, 123[4].server"

    def _array_flag(self, array: ArraySpec) -> list[str]:
        return ["-J", pbs_array_argument(array)]

    def command_path(self, name: str, env: Mapping[str, str]) -> str:
        """PBS's own ``name``, not Slurm's wrapper of the same name (:mod:`hpcjobs.schedulers.locate`)."""
        return locate_pbs_command(name, env).path

    def command_folder_probe(self) -> list[str]:
        """``$PBS_EXEC/bin`` as the login node's PBS configuration file says (``/etc/pbs.conf``, pbs.conf(8B))."""
        return ["sh", "-c", '. "${PBS_CONF_FILE:-/etc/pbs.conf}" >/dev/null 2>&1; '
                'printf "%s/bin\\n" "${PBS_EXEC:-/opt/pbs}"']

    def submit_argv(self, script: Path, options: SubmitOptions) -> list[str]:
        """``qsub`` with the options as arguments (command-line options win over ``#PBS`` lines)."""
        argv = ["qsub"]
        if options.array is not None:
            argv += self._array_flag(options.array)
        depend = self._depend(options)
        if depend:
            argv += ["-W", "depend=" + depend]
        if options.job_name:
            argv += ["-N", options.job_name]
        if options.comment:
            argv += ["-v", f"HPCJOBS_TAG={options.comment}"]
        if options.hold:
            argv += ["-h"]
        argv += list(options.extra_args)
        argv.append(str(script))
        return argv

    def _depend(self, options: SubmitOptions) -> str:
        """``depend=`` value: ``afterok:1.srv:2[].srv,afterany:3.srv`` (qsub(1B): types separated by commas).

        OpenPBS takes an array job's id (``2[].srv``) in ``afterok``/``afterany`` for the whole array.
        """
        groups = [("ok", tuple(options.dependencies))] if options.dependencies else []
        groups += [(d.condition, d.job_ids) for d in options.after if d.job_ids]
        return ",".join(self._depend_group(cond, self.check_job_ids(ids)) for cond, ids in groups)

    def _depend_group(self, condition: str, job_ids: Sequence[str]) -> str:
        return f"after{condition}:" + ":".join(job_ids)

    def parse_submit(self, stdout: str) -> str:
        """The job id qsub printed (``1234.server``, ``1234[].server``)."""
        return fmt.parse_qsub_output(stdout)

    def status_argv(self, job_ids: Sequence[str]) -> list[str]:
        """One ``qstat -x -f -F json -t`` call for every job (array parents list their subjobs)."""
        return fmt.qstat_status_argv(self.check_job_ids(job_ids))

    def parse_status(self, stdout: str) -> list[JobStatus]:
        """Records of :meth:`status_argv` output, one per job, array parent or subjob."""
        return fmt.parse_qstat_json_status(stdout)

    def fallback_status_argv(self, job_ids: Sequence[str]) -> list[str]:
        """``qstat -x -f -t`` text, for servers whose JSON output is broken."""
        return fmt.qstat_text_status_argv(self.check_job_ids(job_ids))

    def parse_fallback_status(self, stdout: str) -> list[JobStatus]:
        """Records of :meth:`fallback_status_argv` output."""
        return fmt.parse_qstat_text_status(stdout)

    def accounting_unavailable(self, stderr: str) -> bool:
        """Whether the JSON status call failed in a way the text form avoids (an old qstat without -F)."""
        return "illegal option" in stderr.lower() or "invalid option" in stderr.lower()

    def tolerable_status_error(self, stderr: str) -> bool:
        """qstat exits non-zero when some ids are unknown but still prints the others."""
        errors = fmt.parse_error_lines(stderr)
        return bool(errors) and all(e.kind in (fmt.UNKNOWN_JOB, fmt.JOB_FINISHED) for e in errors)

    def tag_query_argvs(self, name: str, user: str) -> list[list[str]]:
        """One call listing jobs with their attributes (history included) to find lost submissions by tag.

        PBS cannot filter by job name in ``qstat``; the job list is read once (only after a lost
        answer or a crash) and filtered here by name and by the ``HPCJOBS_TAG`` variable.
        """
        del name, user  # filtered in parse_tag_query
        return [["qstat", "-x", "-f", "-F", "json"]]

    def parse_tag_query(self, stdout: str) -> list[tuple[str, str]]:
        """``(job id, hpcjobs tag)`` of each job in :meth:`tag_query_argvs` output that carries a tag."""
        if not stdout.strip():
            return []
        return [(r.job_id, r.comment) for r in self.parse_status(stdout) if r.comment]

    def same_job(self, a: str, b: str) -> bool:
        """Same job by sequence number and array index, whatever the server suffix."""
        try:
            return fmt.same_job(a, b)
        except Exception:
            return a == b

    def job_key(self, job_id: str) -> str:
        """A comparison key for an id: sequence number and array index, without the server suffix."""
        try:
            jid = fmt.parse_job_id(job_id)
        except Exception:
            return job_id
        if jid.index is not None:
            return f"{jid.sequence}[{jid.index}]"
        return f"{jid.sequence}[]" if jid.is_array else str(jid.sequence)

    def cancel_argv(self, job_ids: Sequence[str]) -> list[str]:
        """``qdel -- IDS``: all ``job_ids`` in one call (``--``: none of them is read as an option)."""
        return ["qdel", "--", *self.check_job_ids(job_ids)]

    def parse_limits(self, stdout: str) -> ClusterLimits:
        """``max_array_size`` from ``qstat -B -f -F json`` (server attributes)."""
        import json

        try:
            servers = json.loads(stdout).get("Server", {})
        except ValueError:
            return ClusterLimits()
        for attrs in servers.values():
            size = fmt.as_int(attrs.get("max_array_size"))
            return ClusterLimits(max_array_size=size)
        return ClusterLimits()

    def config_argv(self) -> list[str]:
        """Server attributes (``qstat -B -f -F json``)."""
        return ["qstat", "-B", "-f", "-F", "json"]

    def parse_cluster_name(self, stdout: str) -> str | None:
        """The PBS server name."""
        import json

        try:
            servers = json.loads(stdout).get("Server", {})
        except ValueError:
            return None
        return next(iter(servers), None)

    # --- accounting and plan hooks ---

    saved_accounting_hint = "save the accounting log or `qstat -x -f -F json` output"
    job_exec_codes = PBS_EXEC_CODES
    plans_partitions = True
    wait_history_source: str | None = "qstat-json"
    wait_history_words = "jobs the server still holds (qstat -x), at most {days} days old"

    def saved_format(self, detected: str) -> str:
        """A PBS Pro accounting log without PBS Pro's own markers is still PBS Pro's."""
        return "pbs-accounting" if detected == "torque-accounting" else detected

    def format_memory(self, nbytes: int) -> str:
        """``8gb``: PBS's own units."""
        return format_memory_pbs(nbytes)

    def wait_history_argv(self) -> list[str]:
        """Every job the server still holds, finished ones included (``qstat -x -f -F json``)."""
        return ["qstat", "-x", "-f", "-F", "json"]

    def queue_state_argv(self) -> list[str]:
        """``qstat -Q -f -F json``: every queue with its attributes."""
        return list(queues.QUEUE_STATE_ARGV)

    def parse_queue_states(self, stdout: str) -> dict[str, QueueState]:
        """Every queue of ``qstat -Q -f -F json`` output, by name."""
        return queues.parse_queue_states(stdout)

    def explain_pending(self, job_ids: Sequence[str], run: QueryRun) -> PendingQuery:
        """``qstat -f -F json`` of the jobs, and for limit reasons ``qstat -Q -f -F json`` (:mod:`.why`)."""
        from hpcjobs.schedulers.pbs.why import explain_pending

        return explain_pending(self.check_job_ids(job_ids), run, self.same_job)

    # --- sweep hooks ---

    def array_log_stem(self, base: Path, name: str, sweep_id: str, chunk: int | None, array_job_id: str | None,
                       array_index: int) -> Path | None:
        """``<sweep>.<chunk>.<index>``, as :meth:`chunk_log_directives` names them."""
        return base / f"{sweep_id}.{chunk}.{array_index}" if chunk is not None else None

    def chunk_log_directives(self, output_dir: str, sweep_id: str, chunk: int,
                             own_directives: Sequence[str]) -> tuple[str, ...]:
        """``-o``/``-e`` naming the sweep and chunk, so that chunks do not overwrite each other's logs.

        PBS expands only ``^array_index^`` in an output path (no job id, unlike Slurm's ``%A``), so the
        generic ``<name>.^array_index^.out`` of every chunk of a sweep (indices restart at 0 in each)
        would be the same file. qsub keeps the last of repeated ``#PBS -o`` lines, so these, added after
        the generated ones, win; a user's own ``-o``/``-e`` directive is left as it is.
        """
        own = {d.split()[0] for d in own_directives if d.split()}
        stem = f"{output_dir}/{sweep_id}.{chunk}.^array_index^"
        return tuple(f"-{k} {stem}.{ext}" for k, ext in (("o", "out"), ("e", "err")) if f"-{k}" not in own)

    # --- render hooks ---

    def directives(self, job: ResolvedJob) -> list[Directive]:
        """``#PBS`` options with one merged ``select`` line (:func:`.directives.pbspro_directives`)."""
        return pbspro_directives(job)

    def env_secret_problem(self, site: SiteConfig, directives: Sequence[str]) -> str | None:
        """Refused: ``qsub -v``/``-V`` put the value in the job's ``Variable_List``, which ``qstat -f`` shows."""
        del directives
        return (f"site {site.name!r} runs {self.name}: passing a secret from the environment would need "
                "`qsub -v`, which stores its value in the job's attributes (shown by `qstat -f`); "
                "use `file:` instead (a file only you can read, e.g. chmod 600 ~/.secret)")

    # --- site hooks ---

    display_name = "PBS Pro/OpenPBS"
    short_name = "PBS"
    label = "PBS server"
    probe_hint = "PBS's qstat -B"

    def probe(self, run: DiscoveryRun, timeout: float) -> Probe | None:
        """The server when PBS's own ``qstat -B -f -F json`` answers."""
        server = discover_live.probe_pbs(run, timeout)
        return None if server is None else Probe(self.name, server)

    def discover_site(self, run: DiscoveryRun, name: str | None, user: str) -> DiscoveredSite:
        """Queues, nodes and limits from ``qstat -Q``, ``pbsnodes -a`` and ``qstat -B`` (JSON)."""
        del user
        return discover_live.discover_pbs_site(run, name=name)


class TorqueBackend(PbsProBackend):
    """Torque commands: ``-t`` arrays, ``qstat -f -x`` XML, ``PBS_ARRAYID``."""

    name = "torque"
    #: queue_states: Torque's qstat prints no JSON (``qstat -Q -f -F json`` is PBS Pro's).
    #: explains_pending: the comments are read from qstat's JSON, which Torque's qstat does not print.
    capabilities = replace(PbsProBackend.capabilities, queue_states=False, explains_pending=False)
    array_index_var = "PBS_ARRAYID"
    job_id_what = "Torque job id"
    queue_state_argv = BaseBackend.queue_state_argv
    parse_queue_states = BaseBackend.parse_queue_states
    explain_pending = BaseBackend.explain_pending

    # --- accounting and plan hooks ---

    saved_accounting_hint = "save the accounting log or `qstat -f -x` XML output"
    job_exec_codes = TORQUE_EXEC_CODES
    wait_history_source = None
    wait_history_argv = BaseBackend.wait_history_argv

    def saved_format(self, detected: str) -> str:
        """Torque's dialects of what detection names PBS Pro's: its accounting log and ``qstat -f`` text."""
        return {"pbs-accounting": "torque-accounting", "qstat-text": "torque-qstat-text"}.get(detected, detected)

    def _array_flag(self, array: ArraySpec) -> list[str]:
        return ["-t", torque_array_argument(array)]

    def _depend_group(self, condition: str, job_ids: Sequence[str]) -> str:
        """Torque waits for a whole array with ``afterokarray:ID[]`` (qsub(1) of Torque); other jobs as PBS."""
        arrays = [j for j in job_ids if "[]" in j]
        plain = [j for j in job_ids if "[]" not in j]
        parts = [f"after{condition}:" + ":".join(plain)] if plain else []
        parts += [f"after{condition}array:{j}" for j in arrays]
        return ",".join(parts)

    def command_path(self, name: str, env: Mapping[str, str]) -> str:
        """Torque's clients are the ones on ``PATH``."""
        del env
        return name

    def status_argv(self, job_ids: Sequence[str]) -> list[str]:
        """One ``qstat -f -x -t`` call (XML) for every job."""
        return tfmt.torque_status_argv(self.check_job_ids(job_ids))

    def parse_status(self, stdout: str) -> list[JobStatus]:
        """Records of Torque's XML status output."""
        return tfmt.parse_torque_xml_status(stdout)

    def fallback_status_argv(self, job_ids: Sequence[str]) -> list[str]:
        """``qstat -f -t -- IDS`` text."""
        return ["qstat", "-f", "-t", "--", *self.check_job_ids(job_ids)]

    def parse_fallback_status(self, stdout: str) -> list[JobStatus]:
        """Records of Torque's ``qstat -f`` text."""
        return tfmt.parse_torque_text_status(stdout)

    def config_argv(self) -> list[str]:
        """Torque's ``qmgr -c 'print server'`` is admin-oriented; limits come from the site config."""
        return ["qstat", "-B", "-f"]

    def parse_limits(self, stdout: str) -> ClusterLimits:
        """``max_job_array_size`` from ``qstat -B -f`` text, when the server sets it."""
        for line in stdout.splitlines():
            key, _, value = line.strip().partition(" = ")
            if key == "max_job_array_size" and is_ascii_digits(value.strip()):
                return ClusterLimits(max_array_size=int(value))
        return ClusterLimits()

    def tag_query_argvs(self, name: str, user: str) -> list[list[str]]:
        """Torque: every job as XML (completed ones stay for ``keep_completed``), filtered here by tag."""
        del name, user
        return [["qstat", "-f", "-x"]]

    def parse_cluster_name(self, stdout: str) -> str | None:
        """The server name from ``qstat -B -f`` (``Server: name``)."""
        for line in stdout.splitlines():
            if line.startswith("Server:"):
                return line.split(":", 1)[1].strip() or None
        return None

    # --- sweep hooks ---

    #: Torque names its array tasks' files itself, and its chunks keep the generated ``-o``/``-e``.
    array_log_stem = BaseBackend.array_log_stem
    chunk_log_directives = BaseBackend.chunk_log_directives

    # --- render hooks ---

    def directives(self, job: ResolvedJob) -> list[Directive]:
        """``#PBS`` options in Torque's ``nodes=N:ppn=P`` form (:func:`.directives.torque_directives`)."""
        return torque_directives(job)

    # --- site hooks ---

    display_name = "Torque"
    short_name = "Torque"
    label = "Torque server"
    probe_hint = "Torque's qstat --version"

    def probe(self, run: DiscoveryRun, timeout: float) -> Probe | None:
        """The server when Torque's ``qstat --version`` and ``qstat -B -f`` answer (not Slurm's wrapper)."""
        server = discover_live.probe_torque(run, timeout)
        return None if server is None else Probe(self.name, server)

    def discover_site(self, run: DiscoveryRun, name: str | None, user: str) -> DiscoveredSite:
        """Queues, nodes and limits from Torque's ``qstat -Q -f``, ``pbsnodes -a`` and ``qstat -B -f``."""
        del user
        return discover_live.discover_torque_site(run, name=name)
