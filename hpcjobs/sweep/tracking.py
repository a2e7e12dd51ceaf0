"""Tracker runs tied to sweep points: the job lines that join a point's run, and the runs read back.

:func:`tracking_lines` is what each point runs after the experiment's ``setup:`` lines (so an
activated environment's ``python3`` is the one used) and before its command, whether the point has a
task of its own or shares a packed one. Every value reaches the script through
:func:`hpcjobs.render.shellvalue.shell_word`; the small Python programs the job runs are constants of
this module, passed as one word to ``python3 -c``.

What a point's job gets is described in :mod:`hpcjobs.config.tracking`. :func:`tracking_columns` gives
:func:`hpcjobs.load_sweep` its ``wandb_run_id``/``wandb_url`` and ``mlflow_run_id``/``mlflow_url``
columns: W&B ids are known from the sweep and point ids alone, MLflow ids from the ``mlflow-run.json``
the job wrote (read bounded, never through a link).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hpcjobs.config.tracking import Tracking, run_key, wandb_run_id, wandb_run_prefix
from hpcjobs.errors import UnsafePathError
from hpcjobs.output import atomic_write_text
from hpcjobs.render.shellvalue import shell_word
from hpcjobs.safe_files import read_regular

log = logging.getLogger("hpcjobs.sweep")

#: The tracking settings saved with a sweep, in its folder (for :func:`tracking_columns`).
TRACKING_SPEC_FILE = "tracking-spec.json"
#: What the job writes in the point's run folder once it has the point's MLflow run.
MLFLOW_RUN_FILE = "mlflow-run.json"
#: The point's parameters in the form W&B reads from ``WANDB_SWEEP_PARAM_PATH``.
WANDB_PARAMS_FILE = "wandb-params.json"
#: Most bytes read of a spec or run file (a few hundred are written).
_MAX_BYTES = 64 * 1024

#: Variables the job sets for the trackers: a container that passes only named variables must pass these.
TRACKER_ENV = ("WANDB_PROJECT", "WANDB_ENTITY", "WANDB_MODE", "WANDB_RUN_ID", "WANDB_RESUME", "WANDB_RUN_GROUP",
               "WANDB_NAME", "WANDB_TAGS", "WANDB_DIR", "WANDB_SWEEP_PARAM_PATH", "MLFLOW_TRACKING_URI",
               "MLFLOW_EXPERIMENT_NAME", "MLFLOW_RUN_ID")

# Writes the point's parameters as {"name": {"value": v}} (the file a W&B sweep agent writes), atomically.
_WANDB_PARAMS_PY = """\
import json, os
d = os.environ["HPCJOBS_RUN_DIR"]
params = json.loads(os.environ["HPCJOBS_PARAMS_JSON"])
tmp = os.path.join(d, ".wandb-params.json.%d" % os.getpid())
with open(tmp, "x", encoding="utf-8") as f:
    json.dump({k: {"value": v} for k, v in params.items()}, f, ensure_ascii=False)
os.replace(tmp, os.path.join(d, "wandb-params.json"))
"""

# Finds the point's MLflow run by its run key tag, or creates it with the point's parameters; prints its
# id and writes mlflow-run.json. Runs once per point start: a requeued or resubmitted job finds the run.
_MLFLOW_RUN_PY = """\
import json, os, sys
from mlflow.tracking import MlflowClient
env = os.environ
key, run_dir = env["HPCJOBS_TRACKING_KEY"], env["HPCJOBS_RUN_DIR"]
client = MlflowClient()
name = env["MLFLOW_EXPERIMENT_NAME"]
exp = client.get_experiment_by_name(name)
if exp is not None:
    exp_id = exp.experiment_id
else:
    try:
        exp_id = client.create_experiment(name)
    except Exception:  # another point's job made it between the look and the create: use that one
        exp = client.get_experiment_by_name(name)
        if exp is None:
            raise
        exp_id = exp.experiment_id
quoted = key.replace("\\\\", "\\\\\\\\").replace("'", "\\\\'")
found = client.search_runs([exp_id], filter_string="tags.`hpcjobs.run_key` = '%s'" % quoted, max_results=1)
job = env.get("HPCJOBS_TRACKING_JOB", "")
if found:
    run_id = found[0].info.run_id
    client.set_tag(run_id, "hpcjobs.job_id", job)
    resumed = True
else:
    tags = {"hpcjobs.run_key": key, "hpcjobs.sweep_id": env["HPCJOBS_SWEEP_ID"],
            "hpcjobs.point_id": env["HPCJOBS_POINT_ID"], "hpcjobs.point_index": env["HPCJOBS_POINT_INDEX"],
            "hpcjobs.job_id": job}
    run = client.create_run(exp_id, tags=tags, run_name="%s/%s" % (env["HPCJOBS_SWEEP_ID"], env["HPCJOBS_POINT_INDEX"]))
    run_id = run.info.run_id
    resumed = False
    params = json.loads(env["HPCJOBS_PARAMS_JSON"])
    for k, v in params.items():
        text = v if isinstance(v, str) else json.dumps(v)
        client.log_param(run_id, k[:250], text[:6000])
record = {"run_id": run_id, "experiment_id": exp_id, "run_key": key, "resumed": resumed}
tmp = os.path.join(run_dir, ".mlflow-run.json.%d" % os.getpid())
with open(tmp, "x", encoding="utf-8") as f:
    json.dump(record, f)
os.replace(tmp, os.path.join(run_dir, "mlflow-run.json"))
sys.stdout.write(run_id)
"""


def tracking_lines(tracking: Tracking, sweep_id: str, experiment_name: str, job_id_var: str) -> tuple[str, ...]:
    """The lines of a point's job that join its tracker runs (after ``setup:``, before the command).

    Args:
        tracking: The experiment's ``tracking:``.
        sweep_id: The sweep's id (the runs' group, and part of their key).
        experiment_name: The experiment's name (the default MLflow experiment).
        job_id_var: The variable that holds the scheduler's job id in the job (for the ``job-<id>`` tag).
    """
    python = shell_word(tracking.python)
    job = f'"${{{job_id_var}:-${{HPCJOBS_JOB_ID:-none}}}}"'
    lines: list[str] = [f"export HPCJOBS_TRACKING_KEY={shell_word(sweep_id)}/\"$HPCJOBS_POINT_ID\" "
                        f"HPCJOBS_TRACKING_JOB={job}"]
    wandb = tracking.wandb
    if wandb is not None:
        settings = [f"WANDB_PROJECT={shell_word(wandb.project)}"]
        if wandb.entity:
            settings.append(f"WANDB_ENTITY={shell_word(wandb.entity)}")
        if wandb.mode:
            settings.append(f"WANDB_MODE={wandb.mode}")
        tags = ",".join(["hpcjobs", *wandb.tags])
        lines += [
            "export " + " ".join(settings),
            f'export WANDB_RUN_ID={shell_word(wandb_run_prefix(sweep_id))}-"$HPCJOBS_POINT_ID" WANDB_RESUME=allow '
            f"WANDB_RUN_GROUP={shell_word(sweep_id)}",
            f'export WANDB_NAME={shell_word(sweep_id)}/"$HPCJOBS_POINT_INDEX" '
            f'WANDB_TAGS={shell_word(tags)},point-"$HPCJOBS_POINT_ID",job-"$HPCJOBS_TRACKING_JOB"',
            'export WANDB_DIR="${WANDB_DIR:-$HPCJOBS_RUN_DIR}"',
            f"if {python} -c {shell_word(_WANDB_PARAMS_PY)}; then",
            f'    export WANDB_SWEEP_PARAM_PATH="$HPCJOBS_RUN_DIR/{WANDB_PARAMS_FILE}"',
            "else",
            "    printf 'hpcjobs: could not write %s/%s: wandb.config gets no parameters from hpcjobs\\n' "
            f'"$HPCJOBS_RUN_DIR" {WANDB_PARAMS_FILE} >&2',
            "fi",
        ]
    mlflow = tracking.mlflow
    if mlflow is not None:
        settings = [f"MLFLOW_EXPERIMENT_NAME={shell_word(mlflow.experiment or experiment_name)}"]
        if mlflow.tracking_uri:
            settings.append(f"MLFLOW_TRACKING_URI={shell_word(mlflow.tracking_uri)}")
        lines += [
            "export " + " ".join(settings),
            f'rm -f -- "$HPCJOBS_RUN_DIR/{MLFLOW_RUN_FILE}"',
            f"if HPCJOBS_MLFLOW_RUN=\"$({python} -c {shell_word(_MLFLOW_RUN_PY)})\" "
            '&& [ -n "$HPCJOBS_MLFLOW_RUN" ]; then',
            '    export MLFLOW_RUN_ID="$HPCJOBS_MLFLOW_RUN"',
            "    printf 'hpcjobs: MLflow run %s\\n' \"$MLFLOW_RUN_ID\" >&2",
            "else",
            "    printf 'hpcjobs: no MLflow run for point %s (is mlflow installed for %s?): mlflow.start_run() "
            f"will start a new one\\n' \"$HPCJOBS_POINT_ID\" {python} >&2",
            "fi",
        ]
    return tuple(lines)


def write_tracking_spec(folder: Path, tracking: Tracking | None, experiment_name: str) -> Path | None:
    """Save the sweep's ``tracking:`` in ``folder/tracking-spec.json`` (atomically), or remove a stale one."""
    path = folder / TRACKING_SPEC_FILE
    if tracking is None:
        if path.is_symlink() or path.is_file():
            path.unlink()  # a link itself, never what it leads to
        return None
    payload = {"tracking": tracking.model_dump(mode="json", exclude_none=True), "experiment": experiment_name}
    return atomic_write_text(path, json.dumps(payload, indent=1, sort_keys=True) + "\n", below=folder)


def read_tracking_spec(folder: Path) -> Tracking | None:
    """The ``tracking:`` saved with a sweep (``None``: none, or one that cannot be read, with a warning)."""
    try:
        payload = json.loads(read_regular(folder / TRACKING_SPEC_FILE, _MAX_BYTES, inside=folder))
        return Tracking.model_validate(payload["tracking"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, RecursionError, UnsafePathError) as exc:
        log.warning("ignoring %s: %s", folder / TRACKING_SPEC_FILE, exc)
        return None


_RUN_ID_RE = re.compile(r"^[0-9A-Za-z_-]{1,64}$")


def read_mlflow_run(run_dir: Path, sweep_id: str, point_id: str) -> dict[str, Any] | None:
    """The ``mlflow-run.json`` a point's job wrote, when it is a regular file in the run folder (a link out of
    it is refused) naming this point's run key."""
    try:
        record = json.loads(read_regular(run_dir / MLFLOW_RUN_FILE, _MAX_BYTES, inside=run_dir))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError, UnsafePathError) as exc:
        log.warning("ignoring %s: %s", run_dir / MLFLOW_RUN_FILE, exc)
        return None
    if not (isinstance(record, dict) and record.get("run_key") == run_key(sweep_id, point_id)
            and isinstance(record.get("run_id"), str) and _RUN_ID_RE.match(record["run_id"])
            and isinstance(record.get("experiment_id"), str) and _RUN_ID_RE.match(record["experiment_id"])):
        log.warning("ignoring %s: not the record of run %s", run_dir / MLFLOW_RUN_FILE, run_key(sweep_id, point_id))
        return None
    return record


def _web_uri(uri: str | None) -> str | None:
    return uri.rstrip("/") if uri and re.match(r"^https?://", uri) else None


def tracking_columns(folder: Path, sweep_id: str, point_ids: Sequence[str]) -> dict[str, list[str | None]]:
    """The tracker columns of a sweep's points, in ``point_ids`` order (none when the sweep has no ``tracking:``).

    ``wandb_run_id`` (every point: the id is known before the run starts) and ``wandb_url`` (with an
    ``entity:``); ``mlflow_run_id`` and ``mlflow_url`` (a web tracking URI) of the points whose job
    has found or created its run.
    """
    tracking = read_tracking_spec(folder)
    if tracking is None:
        return {}
    columns: dict[str, list[str | None]] = {}
    if tracking.wandb is not None:
        ids = [wandb_run_id(sweep_id, p) for p in point_ids]
        columns["wandb_run_id"] = list(ids)
        w = tracking.wandb
        base = w.base_url.rstrip("/")
        columns["wandb_url"] = ([f"{base}/{w.entity}/{w.project}/runs/{i}" for i in ids]
                                if w.entity and w.mode != "disabled" else [None] * len(ids))
    if tracking.mlflow is not None:
        web = _web_uri(tracking.mlflow.tracking_uri)
        run_ids: list[str | None] = []
        urls: list[str | None] = []
        for p in point_ids:
            record = read_mlflow_run(folder / "points" / p, sweep_id, p)
            run_ids.append(record["run_id"] if record else None)
            urls.append(f"{web}/#/experiments/{record['experiment_id']}/runs/{record['run_id']}"
                        if record and web else None)
        columns["mlflow_run_id"] = run_ids
        columns["mlflow_url"] = urls
    return columns


__all__ = ["MLFLOW_RUN_FILE", "TRACKER_ENV", "TRACKING_SPEC_FILE", "WANDB_PARAMS_FILE", "read_mlflow_run",
           "read_tracking_spec", "tracking_columns", "tracking_lines", "write_tracking_spec"]
