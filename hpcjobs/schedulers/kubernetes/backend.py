"""The Kubernetes backend: a chunk becomes ``batch/v1`` Jobs created with one ``kubectl create -f``.

Rendering writes what the Jobs need into the script as ``#K8S key=value`` lines (values are JSON
where they are structured: resources, node selector, tolerations, volumes), the way ``#SBATCH``
lines carry sbatch's options; ``hpcjobs render`` shows them. At submission,
:meth:`KubernetesBackend.submit_argv_in` reads them back, builds the manifest with the submit
directory, the run folders and the user (:func:`hpcjobs.schedulers.kubernetes.formats.manifest`), writes it
beside the script as ``<chunk>.k8s.json`` and returns ``kubectl create -f <that file> -o name``.
Nothing goes through a shell: the script runs as ``["/bin/bash", <script>]``, and every value is
data in the manifest.

One ``kubectl get jobs,pods -l 'hpcjobs/chunk in (...)' -o json`` per status poll; cancel patches
the chunk's Jobs to parallelism 0 with the annotation ``hpcjobs/cancelled`` (Kubernetes deletes their
running pods and keeps the Jobs, so finished points keep their state); a lost submission is found by
``kubectl get jobs -l hpcjobs/name=<experiment>`` and the ``hpcjobs/tag`` annotation.

The server's version chooses the form: one Indexed Job per chunk needs per-index retry limits
(``backoffLimitPerIndex``, Kubernetes 1.29), so a server that says it is 1.29 or later
(``kubectl version -o json``, asked once per submitting client) gets one, and older servers, or one
that does not answer, get one Job per point, all created in the same call. ``kubernetes.indexed_jobs``
in the site file overrides the choice. :func:`render_manifest` builds the manifest ``hpcjobs render``
prints.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcjobs.config.mounts import mount_path
from hpcjobs.errors import ConfigError, ConfigProblem, SchedulerOutputError
from hpcjobs.output import atomic_write_text
from hpcjobs.schedulers.base import Capabilities, Directive, JobStatus, SubmitOptions
from hpcjobs.schedulers.containers import ContainerBackend, distributed_problem
from hpcjobs.schedulers.kubernetes import formats as fmt
from hpcjobs.states import JobTag, parse_job_tag

if TYPE_CHECKING:  # the render layer imports this module, not the other way round
    from hpcjobs.config.site import SiteConfig
    from hpcjobs.resolve import ResolvedJob

DIRECTIVE_PREFIX = "#K8S"
_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
#: A job id on Kubernetes: ``<namespace>/<chunk>`` (or a bare chunk, in ``default``), each a DNS-1123
#: label (lower-case letters, digits and ``-``, alphanumeric at both ends, at most 63): what a namespace
#: and a label value hpcjobs gives (the chunk's Jobs are ``<chunk>`` or ``<chunk>-<i>``) may be.
JOB_ID_RE = re.compile(rf"(?:{_LABEL}/)?{_LABEL}")
#: Keys whose value is JSON in a ``#K8S`` line.
JSON_KEYS = frozenset({"requests", "limits", "nodeSelector", "tolerations", "volume", "indexed", "tasks", "parallel",
                       "activeDeadlineSeconds", "nodes"})


def _quantity_memory(nbytes: int) -> str:
    """Memory as a Kubernetes quantity in MiB, rounded up: ``512Mi``."""
    return f"{math.ceil(nbytes / 2**20)}Mi"


def kubernetes_directives(job: ResolvedJob) -> list[Directive]:
    """``#K8S key=value`` lines: what the Jobs of ``job`` need, one setting per line.

    Raises:
        ConfigError: The site has no ``kubernetes:`` settings, or the job needs what this backend
            does not do (:func:`hpcjobs.schedulers.containers.distributed_problem`).
    """
    k = job.site.kubernetes
    if k is None:
        raise ConfigError(ConfigProblem(f"site {job.site.name!r} runs kubernetes but has no `kubernetes:` settings",
                                        key="kubernetes"))
    distributed_problem(job, "Kubernetes")
    if job.array is not None and (job.array.start != 0 or job.array.step != 1):
        raise ConfigError(ConfigProblem(f"a Kubernetes job's pods are numbered 0..N-1; array {job.array.start}-"
                                        f"{job.array.end}:{job.array.step} cannot be run as one", key="array"))
    tasks = job.array.size if job.array is not None else job.nodes
    # the pods of a distributed job all run at once, whatever max_parallel says
    limits = [] if job.nodes > 1 else [t for t in (job.array.throttle if job.array else None, k.max_parallel) if t]
    cpus = job.cpus_per_task * job.tasks_per_node
    requests: dict[str, str] = {"cpu": str(cpus)}
    if job.memory_per_node is not None:
        requests["memory"] = _quantity_memory(job.memory_per_node)
    caps = dict(requests)
    if job.gpus_per_node:  # extended resources: requests equal limits, and only limits need be given
        caps[k.gpu_resource] = str(job.gpus_per_node)
    d: list[Directive] = [
        ("namespace", f"namespace={k.namespace}"),
        ("image", f"image={job.job_image or k.image}"),
        ("imagePullPolicy", f"imagePullPolicy={k.image_pull_policy}"),
        ("tasks", f"tasks={tasks}"),
        ("parallel", f"parallel={min([tasks, *limits])}"),
        ("indexed", f"indexed={json.dumps(k.indexed_jobs)}"),
        ("requests", f"requests={json.dumps(requests, sort_keys=True)}"),
        ("limits", f"limits={json.dumps(caps, sort_keys=True)}"),
    ]
    if job.nodes > 1:
        d.append(("nodes", f"nodes={job.nodes}"))
    if job.walltime is not None:
        d.append(("activeDeadlineSeconds", f"activeDeadlineSeconds={job.walltime}"))
    if k.node_selector:
        d.append(("nodeSelector", f"nodeSelector={json.dumps(k.node_selector, sort_keys=True)}"))
    if k.tolerations:
        d.append(("tolerations", "tolerations=" + json.dumps([t.model_dump(exclude_none=True) for t in k.tolerations])))
    if k.priority_class:
        d.append(("priorityClassName", f"priorityClassName={k.priority_class}"))
    if k.service_account:
        d.append(("serviceAccountName", f"serviceAccountName={k.service_account}"))
    for v in k.volumes:
        spec = {"hostPath": v.host_path} if v.host_path else {"claim": v.claim}
        d.append(("volume", "volume=" + json.dumps({**spec, "target": v.target, "readOnly": v.readonly})))
    d.append(("runFolders", f"runFolders={'mount' if k.mount_run_folders else 'none'}"))
    d.append(("runAs", f"runAs={k.run_as}"))
    return d


def read_directives(script: Path) -> dict[str, Any]:
    """The ``#K8S`` settings of a rendered script (``volume`` lines collected in a list).

    Raises:
        ConfigError: The script cannot be read, or a line is not ``key=value`` with JSON where it must be.
    """
    try:
        text = script.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(ConfigProblem(f"cannot read the script: {exc}", file=str(script))) from None
    return parse_directives(text, str(script))


def parse_directives(text: str, source: str) -> dict[str, Any]:
    """The ``#K8S`` settings of a script's text (``source`` names it in errors).

    Raises:
        ConfigError: A line is not ``key=value`` with JSON where it must be, or ``image``/``namespace`` is missing.
    """
    script = source
    out: dict[str, Any] = {"volume": []}
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            break
        if not line.startswith(DIRECTIVE_PREFIX + " "):
            continue
        key, sep, value = line[len(DIRECTIVE_PREFIX) + 1:].strip().partition("=")
        if not sep:
            raise ConfigError(ConfigProblem(f"{DIRECTIVE_PREFIX} line {line!r} is not key=value", file=str(script),
                                            line=n))
        if key in JSON_KEYS:
            try:
                parsed = json.loads(value)
            except ValueError as exc:
                raise ConfigError(ConfigProblem(f"{DIRECTIVE_PREFIX} {key}: not JSON ({exc})", file=str(script),
                                                line=n)) from None
            if key == "volume":
                out["volume"].append(parsed)
                continue
            out[key] = parsed
        else:
            out[key] = value
    for key in ("image", "namespace"):
        if key not in out:
            raise ConfigError(ConfigProblem(f"the script has no `{DIRECTIVE_PREFIX} {key}=` line", file=str(script)))
    return out


def _run_folders(script: Path, cwd: Path) -> list[Path]:
    """The submit directory and the folder above the script's (the sweep folder), outermost first."""
    folders: list[Path] = []
    for p in sorted({cwd.resolve(), script.resolve().parent.parent}, key=lambda p: (len(p.parts), str(p))):
        if p != Path("/") and not any(p.is_relative_to(f) for f in folders):
            folders.append(p)
    return folders


def pod_spec(settings: dict[str, Any], script: Path, cwd: Path) -> dict[str, Any]:
    """The pod spec of a chunk's pods from its ``#K8S`` settings, the submit directory and the user."""
    mounts: list[dict[str, Any]] = []
    volumes: list[dict[str, Any]] = []
    entries = list(settings.get("volume", []))
    if settings.get("runFolders", "mount") == "mount":
        for folder in _run_folders(script, cwd):
            try:
                mount_path(str(folder))
            except ValueError as exc:
                raise ConfigError(ConfigProblem(f"cannot mount the run folder into the job: {exc}",
                                                key="kubernetes.mount_run_folders")) from None
            entries.append({"hostPath": str(folder), "target": str(folder), "readOnly": False})
    for i, v in enumerate(entries):
        name = f"v{i}"
        source = ({"hostPath": {"path": v["hostPath"]}} if "hostPath" in v
                  else {"persistentVolumeClaim": {"claimName": v["claim"]}})
        volumes.append({"name": name, **source})
        mounts.append({"name": name, "mountPath": v["target"], "readOnly": bool(v.get("readOnly"))})
    container: dict[str, Any] = {
        "name": "job", "image": settings["image"], "imagePullPolicy": settings.get("imagePullPolicy", "IfNotPresent"),
        "command": ["/bin/bash", str(script)], "workingDir": str(cwd),
        "resources": {"requests": settings.get("requests", {}), "limits": settings.get("limits", {})},
        "volumeMounts": mounts,
    }
    spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [container], "volumes": volumes,
                            "enableServiceLinks": False}
    for key in ("nodeSelector", "tolerations", "priorityClassName", "serviceAccountName"):
        if settings.get(key):
            spec[key] = settings[key]
    if settings.get("runAs", "submitter") == "submitter":
        spec["securityContext"] = {"runAsUser": os.getuid(), "runAsGroup": os.getgid()}
    return spec


def chunk_manifest(settings: dict[str, Any], script: Path, cwd: Path, tag: JobTag,
                   server_version: tuple[int, int] | None = None) -> tuple[dict[str, Any], str]:
    """The object ``kubectl create -f`` takes for a chunk, and the chunk's name.

    The form is the site's (``indexed`` in the ``#K8S`` lines), else the server's
    (:func:`hpcjobs.schedulers.kubernetes.formats.indexed_for`).

    Raises:
        ConfigError: The chunk cannot be named (too long).
    """
    indexed = settings.get("indexed")
    if indexed is None:
        indexed = fmt.indexed_for(server_version)
    tasks = int(settings.get("tasks", 1))
    nodes = int(settings.get("nodes", 1))
    try:
        chunk = fmt.chunk_name(tag, tasks, bool(indexed), nodes=nodes)
    except ValueError as exc:
        raise ConfigError(ConfigProblem(str(exc), key="array")) from None
    experiment, _ = fmt.experiment_of(tag.sweep_id)
    doc = fmt.manifest(pod_spec(settings, script, cwd), chunk=chunk, namespace=settings["namespace"],
                       tag=tag.render(), experiment=experiment, tasks=tasks,
                       parallel=int(settings.get("parallel", tasks)),
                       deadline_s=settings.get("activeDeadlineSeconds"), indexed=bool(indexed), nodes=nodes)
    return doc, chunk


def render_manifest(text: str, script: Path, cwd: Path, tag: JobTag,
                    server_version: tuple[int, int] | None = None) -> dict[str, Any]:
    """The manifest a rendered script (``text``, to be written at ``script``) would be submitted as from ``cwd``.

    Raises:
        ConfigError: The ``#K8S`` lines are not usable.
    """
    settings = parse_directives(text, str(script))
    return chunk_manifest(settings, script, cwd, tag, server_version)[0]


class KubernetesBackend(ContainerBackend):
    """Kubernetes commands (``kubectl``) and output parsers.

    Every job id is checked (:meth:`check_job_ids`) before it goes into an argv; Job names are operands
    after ``--`` (kubectl's flags stop there).
    """

    name = "kubernetes"
    capabilities = Capabilities(services=True, submit_in_folder=True, submit_names_job=True, server_version=True,
                                logs_command=True, renders_manifest=True)
    directive_prefix = DIRECTIVE_PREFIX
    array_index_var = "HPCJOBS_TASK_INDEX"
    job_id_var = "HPCJOBS_JOB_ID"
    job_id_what = "Kubernetes job id"
    job_id_pattern = JOB_ID_RE
    job_id_grammar = "<namespace>/<chunk>, each a DNS-1123 label (a-z, 0-9 and -, at most 63)"
    # --- accounting and plan hooks ---
    live_accounting_source = "kubectl"

    def submit_argv(self, script: Path, options: SubmitOptions) -> list[str]:
        """:meth:`submit_argv_in` the current directory."""
        return self.submit_argv_in(script, options, Path.cwd())

    def needs_server_version(self, script: Path) -> bool:
        """Whether the site leaves the Job form to the server's version (``indexed_jobs`` unset)."""
        return script.exists() and read_directives(script).get("indexed", False) is None

    def server_version_argv(self) -> list[str]:
        """``kubectl version -o json``: the client's and, when it answers, the server's version."""
        return ["kubectl", "version", "-o", "json"]

    def parse_server_version(self, stdout: str) -> tuple[int, int] | None:
        """The server's ``(major, minor)``, or ``None`` when it did not answer."""
        return fmt.parse_server_version(stdout)

    def submit_argv_in(self, script: Path, options: SubmitOptions, cwd: Path, *,
                       server_version: tuple[int, int] | None = None) -> list[str]:
        """Write the chunk's manifest beside ``script`` and return the ``kubectl create`` of it.

        Args:
            server_version: The server's version, which chooses the Job form when the site does not.

        Raises:
            ConfigError: The script's ``#K8S`` lines are not usable, or the options carry no hpcjobs tag.
        """
        tag = parse_job_tag(options.comment)
        if tag is None:
            raise ConfigError(ConfigProblem("Kubernetes Jobs are named after their hpcjobs tag, and none was given",
                                            key="comment"))
        if not script.exists():  # a dry run shows the command before the script is written
            return ["kubectl", "create", "-f", f"<the manifest of {script.name}>", "-o", "name"]
        settings = read_directives(script)
        doc, chunk = chunk_manifest(settings, script, cwd, tag, server_version)
        path = atomic_write_text(script.parent / f"{chunk}.k8s.json", json.dumps(doc, indent=1) + "\n")
        return ["kubectl", "--namespace", settings["namespace"], "create", "-f", str(path), "-o", "name",
                *options.extra_args]

    def parse_submit(self, stdout: str) -> str:
        """The first Job ``kubectl create -o name`` printed (the job id is the chunk's: see parse_submit_for)."""
        return fmt.parse_created(stdout)[0]

    def parse_submit_for(self, argv: Sequence[str], stdout: str) -> str:
        """The job id of a submission, ``<namespace>/<chunk>``, once kubectl printed the Jobs it created.

        Raises:
            SchedulerOutputError: kubectl printed no Job.
        """
        fmt.parse_created(stdout)
        manifest = next((a for a in argv if a.endswith(".k8s.json")), None)
        if manifest is None:
            raise SchedulerOutputError("the submit command names no manifest")
        namespace = argv[argv.index("--namespace") + 1] if "--namespace" in argv else "default"
        return f"{namespace}/{Path(manifest).name.removesuffix('.k8s.json')}"

    def status_argv(self, job_ids: Sequence[str]) -> list[str]:
        """One ``kubectl get jobs,pods`` of every chunk (by label), in their namespace."""
        job_ids = self.check_job_ids(job_ids)
        namespaces = {fmt.split_job_id(j)[0] for j in job_ids}
        chunks = sorted({fmt.split_job_id(j)[1] for j in job_ids})
        scope = ["--namespace", namespaces.pop()] if len(namespaces) == 1 else ["--all-namespaces"]
        return ["kubectl", *scope, "get", "jobs,pods", "-l", f"{fmt.CHUNK_LABEL} in ({','.join(chunks)})",
                "-o", "json"]

    def parse_status(self, stdout: str) -> list[JobStatus]:
        """One record per point (:func:`hpcjobs.schedulers.kubernetes.formats.job_statuses`)."""
        return fmt.parse_get(stdout)

    def cancel_argv(self, job_ids: Sequence[str]) -> list[str]:
        """Patch every Job of the chunks to parallelism 0 and mark them cancelled: one ``kubectl patch``.

        Kubernetes deletes the running pods of a Job whose parallelism drops and keeps the Job, so the
        chunk's finished points keep their state.
        """
        job_ids = self.check_job_ids(job_ids)
        namespaces = {fmt.split_job_id(j)[0] for j in job_ids}
        names = [name for job_id in job_ids for name in fmt.job_names(fmt.split_job_id(job_id)[1])]
        patch = {"metadata": {"annotations": {fmt.CANCELLED_ANNOTATION: "true"}}, "spec": {"parallelism": 0}}
        return ["kubectl", "--namespace", sorted(namespaces)[0], "patch", "--type", "merge",
                "-p", json.dumps(patch, separators=(",", ":")), "--", "jobs", *names]

    def tag_query_argvs(self, name: str, user: str) -> list[list[str]]:
        """The Jobs of experiment ``name`` in every namespace, with their tag annotations."""
        del user
        return [["kubectl", "get", "jobs", "--all-namespaces", "-l", f"{fmt.NAME_LABEL}={fmt.label_value(name)}",
                 "-o", "json"]]

    def parse_tag_query(self, stdout: str) -> list[tuple[str, str]]:
        """``(job id, hpcjobs tag)`` of each chunk :meth:`tag_query_argvs` listed."""
        return fmt.parse_tagged_jobs(stdout)

    def logs_argv(self, job_id: str) -> list[str]:
        """What the chunk's pods printed before their output went to the point's files."""
        namespace, chunk = fmt.split_job_id(self.check_job_ids([job_id])[0])
        return ["kubectl", "--namespace", namespace, "logs", "-l", f"{fmt.CHUNK_LABEL}={chunk}", "--prefix",
                "--tail", "-1"]

    # --- render hooks ---

    def directives(self, job: ResolvedJob) -> list[Directive]:
        """``#K8S`` lines (:func:`kubernetes_directives`)."""
        return kubernetes_directives(job)

    platform = "Kubernetes"

    def declared_mounts(self, site: SiteConfig) -> dict[str, str]:
        """``kubernetes.volumes`` by target: the node folder or claim."""
        volumes = site.kubernetes.volumes if site.kubernetes else ()
        return {v.target: f"hostPath {v.host_path}" if v.host_path else f"claim {v.claim}" for v in volumes}

    # --- site hooks ---

    site_section = "kubernetes"
