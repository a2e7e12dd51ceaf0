"""The Kubernetes manifest of a rendered job, as ``hpcjobs render`` prints it (YAML).

On a Kubernetes site the script is the command of the pods; what is submitted is the ``batch/v1``
Jobs built from its ``#K8S`` lines (:func:`hpcjobs.schedulers.kubernetes.backend.render_manifest`). This
module shows them as ``hpcjobs submit`` would create them from the current folder, with a
placeholder token in place of the submission's. No cluster is asked: where the site leaves the form
to the server's version, the form shown is the one chosen for ``server_version`` (default: a server
that does not answer, one Job per point).
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from hpcjobs.render.script import RenderedScript
from hpcjobs.schedulers.kubernetes.backend import parse_directives, render_manifest
from hpcjobs.schedulers.kubernetes.formats import INDEXED_SINCE
from hpcjobs.states import JobTag

#: The token shown in place of a submission's (every submission gets its own).
PLACEHOLDER_TOKEN = "0" * 16


def manifest_yaml(rendered: RenderedScript, cwd: Path, server_version: tuple[int, int] | None = None) -> str:
    """The YAML of the Jobs ``rendered`` would be created as from ``cwd``, after comment lines that say so.

    Raises:
        ConfigError: The script's ``#K8S`` lines are not usable.
    """
    job = rendered.job
    tag = JobTag(job.name, 0, PLACEHOLDER_TOKEN)
    script = cwd / job.output_dir / "scripts" / f"{job.name}.{PLACEHOLDER_TOKEN}.sh"
    doc = render_manifest(rendered.text, script, cwd, tag, server_version)
    auto = parse_directives(rendered.text, str(script)).get("indexed") is None
    since = ".".join(map(str, INDEXED_SINCE))
    if not auto:
        form = "the form the site sets (kubernetes.indexed_jobs)"
    elif server_version is None:
        form = (f"the form for a server older than {since} or one that does not answer; a server of {since} "
                "or later gets one Indexed Job per chunk")
    else:
        form = f"the form for a server of version {server_version[0]}.{server_version[1]}"
    lines = [
        f"# hpcjobs render: the batch/v1 Jobs `hpcjobs submit` creates for {job.name} from {cwd}",
        f"# ({form}).",
        "# Their pods run /bin/bash on the script `hpcjobs render --script` prints, written at submission",
        f"# as {script.name} (with the submission's token for {PLACEHOLDER_TOKEN}).",
    ]
    plain = json.loads(json.dumps(doc))  # no shared objects: no YAML anchors
    body: str = yaml.safe_dump(plain, sort_keys=False, default_flow_style=False, width=100)
    return "\n".join(lines) + "\n" + body


__all__ = ["PLACEHOLDER_TOKEN", "manifest_yaml"]
