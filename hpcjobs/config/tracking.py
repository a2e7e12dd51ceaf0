"""The ``tracking:`` key of an experiment: one experiment-tracker run per sweep point.

::

    tracking:
      wandb: {project: resnet, entity: my-team, mode: offline}
      mlflow: {experiment: resnet, tracking_uri: https://mlflow.example.org}

Each point's job gets the tracker's own environment variables, so that the training code's plain
``wandb.init()`` or ``mlflow.start_run()`` joins the point's run:

- **W&B**: ``WANDB_RUN_ID`` is derived from the sweep id and the point id (:func:`wandb_run_id`) and
  ``WANDB_RESUME=allow``, so a requeued or resubmitted job resumes the *same* run; ``WANDB_RUN_GROUP``
  is the sweep id; ``WANDB_TAGS`` name the point and the job; the point's parameters reach
  ``wandb.config`` through ``WANDB_SWEEP_PARAM_PATH`` (the file a W&B sweep agent writes, so the
  point's values win over the code's defaults, as under an agent).
- **MLflow**: MLflow cannot create a run with a chosen id, so the job finds the point's run by its
  ``hpcjobs.run_key`` tag (or creates it, with the parameters logged) before the command starts and
  exports ``MLFLOW_RUN_ID``; a requeued job finds the same run. The run id is written to
  ``mlflow-run.json`` in the point's run folder, for :func:`hpcjobs.load_sweep`.

This module only declares and checks (pydantic); :mod:`hpcjobs.sweep.tracking` renders and reads.
"""

from __future__ import annotations

import hashlib
import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from hpcjobs.config.types import OneLine, StrictModel

#: The longest W&B run id (W&B's limit on run ids is 64 characters).
WANDB_RUN_ID_MAX = 64
_WANDB_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
_TAG_UNSAFE = re.compile(r"[,\x00-\x1f\x7f]")


def _no_comma(value: str) -> str:
    if _TAG_UNSAFE.search(value):
        raise ValueError("a tag cannot hold a comma or a control character (WANDB_TAGS is comma-separated)")
    if len(value) > 64:
        raise ValueError("a W&B tag has at most 64 characters")
    return value


class WandbTracking(StrictModel):
    """A W&B run per point (``wandb.init()`` in the job picks it up from the environment)."""

    project: OneLine = Field(description="W&B project (WANDB_PROJECT).")
    entity: OneLine | None = Field(None, description="W&B entity: user or team (WANDB_ENTITY); with it, "
                                   "load_sweep gives each point's run URL.")
    mode: Literal["online", "offline", "disabled"] | None = Field(
        None, description="WANDB_MODE: online, offline (sync later with `wandb sync`) or disabled; default: "
        "what the job's environment says.")
    tags: list[OneLine] = Field(default_factory=list, description="Extra tags, besides hpcjobs, "
                                "point-<id> and job-<id>.")
    base_url: OneLine = Field("https://wandb.ai", description="Web address of the W&B app, for the run URLs "
                              "load_sweep gives (a W&B server of your own: its address).")

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: list[str]) -> list[str]:
        return [_no_comma(t) for t in value]


class MlflowTracking(StrictModel):
    """An MLflow run per point, found or created by the job before its command starts."""

    experiment: OneLine | None = Field(None, description="MLflow experiment name (MLFLOW_EXPERIMENT_NAME; "
                                       "default: the experiment's name).")
    tracking_uri: OneLine | None = Field(
        None, description="MLFLOW_TRACKING_URI (a server's address, or file:/path of a file store); default: "
        "what the job's environment says. Put credentials in secrets: (MLFLOW_TRACKING_TOKEN), not here.")
    @field_validator("tracking_uri")
    @classmethod
    def _no_password(cls, value: str | None) -> str | None:
        if value and re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/@]*:[^/@]*@", value):
            raise ValueError("the URI holds a password: it would be written into every job script; give it as "
                             "a secret (MLFLOW_TRACKING_PASSWORD or MLFLOW_TRACKING_TOKEN) instead")
        return value


class Tracking(StrictModel):
    """Experiment trackers, one run per sweep point."""

    wandb: WandbTracking | None = Field(None, description="A W&B run per point: {project: P, entity: E, "
                                        "mode: offline}.")
    mlflow: MlflowTracking | None = Field(None, description="An MLflow run per point: {experiment: E, "
                                          "tracking_uri: URI}.")
    python: OneLine = Field("python3", description="The Python the job runs to prepare the point's runs "
                            "(with mlflow installed, for MLflow); it runs after the experiment's setup: "
                            "lines, so an activated environment's python3 is the one used.")

    @model_validator(mode="after")
    def _some(self) -> Tracking:
        if self.wandb is None and self.mlflow is None:
            raise ValueError("name a tracker: wandb or mlflow")
        return self


def run_key(sweep_id: str, point_id: str) -> str:
    """What names a point's run in every tracker: ``<sweep id>/<point id>`` (the same on every attempt)."""
    return f"{sweep_id}/{point_id}"


def wandb_run_prefix(sweep_id: str) -> str:
    """The part of a W&B run id before the point id: the sweep id, with what W&B refuses replaced, shortened
    (with a hash of the whole id) where the run id would pass :data:`WANDB_RUN_ID_MAX` characters."""
    safe = _WANDB_ID_UNSAFE.sub("-", sweep_id)
    room = WANDB_RUN_ID_MAX - 13  # "-" + a 12-digit point id
    if len(safe) > room or safe != sweep_id:
        digest = hashlib.sha256(sweep_id.encode("utf-8")).hexdigest()[:8]
        safe = f"{safe[:room - 9]}-{digest}"
    return safe


def wandb_run_id(sweep_id: str, point_id: str) -> str:
    """The W&B run id of a point: the same for every attempt, unique per sweep and point, at most 64 characters."""
    return f"{wandb_run_prefix(sweep_id)}-{point_id}"


__all__ = [
    "WANDB_RUN_ID_MAX",
    "MlflowTracking",
    "Tracking",
    "WandbTracking",
    "run_key",
    "wandb_run_id",
    "wandb_run_prefix",
]
