"""The experiment and site-config schemas published as JSON Schema."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from hpcjobs.config.experiment import Experiment
from hpcjobs.config.site import SiteConfig

_MODELS: dict[str, type[BaseModel]] = {"experiment": Experiment, "site": SiteConfig}


def json_schema(kind: str) -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of ``experiment`` or ``site`` files."""
    model = _MODELS[kind]
    schema: dict[str, Any] = model.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://hpcjobs.invalid/schemas/{kind}.schema.json"
    return schema
