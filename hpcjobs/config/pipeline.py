"""The experiment keys of pipelines and notifications: ``after:`` and ``notify:``.

``after:`` lists what the experiment waits for, each item one upstream:

- a string: an experiment file (relative to the experiment's own file), a sweep id or name, or a job
  of ``hpcjobs submit`` (its job id or name); it must have ended successfully (``when: ok``);
- a mapping ``{sweep: REF, when: ok|any|done}``.

``when`` says which ending of the upstream lets the downstream start:

- ``ok``: every upstream point completed with exit code 0 (Slurm ``afterok``, PBS ``afterok``);
- ``any`` and ``done``: every upstream point ended, whatever its result (Slurm ``afterany``, PBS
  ``afterany``); ``done`` is the same condition under the name workflow tools use for it.

``notify: {email: a@b.org, on: [begin, end, fail]}`` becomes the scheduler's mail directives
(Slurm ``--mail-user``/``--mail-type``, PBS ``-M``/``-m``; :mod:`hpcjobs.render.directives`).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, WithJsonSchema, field_validator, model_validator

from hpcjobs.config.types import StrictModel

#: The conditions of ``after:`` (``when``), in the order the documentation lists them.
AFTER_CONDITIONS: tuple[str, ...] = ("ok", "any", "done")
AfterCondition = Literal["ok", "any", "done"]

#: The events of ``notify.on``.
NOTIFY_EVENTS: tuple[str, ...] = ("begin", "end", "fail")
NotifyEvent = Literal["begin", "end", "fail"]

#: An address a scheduler's mail directive takes as one word: ``local@domain`` with a dot-separated
#: domain of letters, digits and hyphens (no quotes, spaces, commas or shell characters).
_EMAIL_RE = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
                       r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*")
_EMAIL_PATTERN = "^" + _EMAIL_RE.pattern + "$"
#: What an upstream reference may hold: it names a file or a sweep, and travels into messages and the ledger.
_REF_RE = re.compile(r"[^\x00-\x1f\x7f]{1,4096}")


def _email(value: str) -> str:
    if len(value) > 254 or not _EMAIL_RE.fullmatch(value):
        raise ValueError(f"{value!r} is not an e-mail address of the form name@example.org (letters, digits and "
                         "._%+- before the @, a domain of letters, digits, - and dots after it)")
    return value


#: An e-mail address (one word in a directive line).
Email = Annotated[str, AfterValidator(_email), WithJsonSchema(
    {"type": "string", "pattern": _EMAIL_PATTERN, "maxLength": 254})]


def _ref(value: str) -> str:
    if not value.strip() or not _REF_RE.fullmatch(value):
        raise ValueError("an upstream is an experiment file, a sweep id or name, or a job id: one non-empty line")
    return value.strip()


UpstreamRef = Annotated[str, AfterValidator(_ref)]


class Upstream(StrictModel):
    """One upstream of ``after:``: what to wait for, and for which ending of it."""

    sweep: UpstreamRef = Field(
        description="An experiment file (relative to this experiment's file; its sweep, or its job of "
        "`hpcjobs submit`, must have been submitted), a sweep id or name, or a job id or name of `hpcjobs submit`.",
    )
    when: AfterCondition = Field(
        "ok", description="ok: every upstream point completed with exit code 0 (afterok); any or done: every "
        "upstream point ended, whatever its result (afterany).",
    )


def short_upstreams(value: Any) -> Any:
    """``after: prep.yaml`` and ``after: [prep.yaml, {sweep: s, when: any}]`` → a list of mappings."""
    if value is None:
        return []
    if isinstance(value, (str, dict)):
        value = [value]
    if isinstance(value, list):
        return [{"sweep": item} if isinstance(item, str) else item for item in value]
    return value


def after_json_schema(schema: dict[str, Any]) -> None:
    """JSON Schema of ``after:``: the mapping form, or the short string form."""
    items = schema.get("items") or {}
    schema.pop("items", None)
    schema.pop("type", None)
    one = {"anyOf": [{"type": "string", "minLength": 1}, items]}
    schema["anyOf"] = [{"type": "array", "items": one}, one]


def _default_events() -> list[NotifyEvent]:
    return ["end", "fail"]


class Notify(StrictModel):
    """Mail from the scheduler about the job (each array of a sweep mails as one job)."""

    email: Email = Field(description="Where the scheduler sends its mail (Slurm --mail-user, PBS -M).")
    on: list[NotifyEvent] = Field(
        default_factory=_default_events, min_length=1,
        description="When: begin (the job starts), end (it ends), fail (it fails); Slurm --mail-type "
        "BEGIN,END,FAIL, PBS -m b, e, a.",
    )

    @model_validator(mode="before")
    @classmethod
    def _yaml_on(cls, value: Any) -> Any:
        # YAML 1.1 (PyYAML) reads an unquoted key `on` as the boolean true.
        if isinstance(value, dict) and True in value and "on" not in value:
            value = dict(value)
            value["on"] = value.pop(True)
        return value

    @field_validator("on")
    @classmethod
    def _unique(cls, value: list[NotifyEvent]) -> list[NotifyEvent]:
        return list(dict.fromkeys(value))


__all__ = ["AFTER_CONDITIONS", "NOTIFY_EVENTS", "AfterCondition", "Email", "Notify", "NotifyEvent",
           "Upstream", "after_json_schema", "short_upstreams"]
