"""One call from a render request to what ``hpcjobs render`` prints or writes.

:func:`render_request` renders an experiment: the packed array script of its sweep's first chunk when
it packs points (``pack:``), else the script of the single job; on a scheduler whose rendered job is
also a manifest (:attr:`~hpcjobs.schedulers.base.Capabilities.renders_manifest`, Kubernetes Jobs), that
manifest. It writes the files into the output folder when one is given, and otherwise gives back the
text to print. Nothing is printed.

Rendering a packed sweep needs the sweep's points, which are a layer above this one: the caller hands
in the packed renderer (:func:`hpcjobs.sweep.prepare.render_packed`); without one every experiment is
rendered as a single job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from hpcjobs.render.script import RenderedScript


class PackedRenderer(Protocol):
    """Renders a packed experiment's array script, or gives ``None`` when it does not pack its points."""

    def __call__(self, path: str | Path, *, site: str | None = ..., overrides: Sequence[str] = ...,
                 template_dirs: tuple[str, ...] = ...) -> RenderedScript | None:
        """The packed script of ``path``, or ``None``: render it as a single job."""
        ...


@dataclass(frozen=True)
class RenderRequest:
    """What to render, and where it goes.

    Attributes:
        experiment: The experiment file.
        site: Site config (name or path); default: the file's, else detected.
        overrides: ``--set KEY=VALUE`` overrides.
        template_dirs: Extra template folders, searched first.
        output_dir: Write the script there (and beside it the manifest, where the scheduler renders
            one) instead of giving back the text.
        script_only: Without ``output_dir``: the script even where the scheduler renders a manifest.
        cwd: The folder the manifest's paths are taken from (default: the current folder, as
            ``hpcjobs submit`` run there would take them).
    """

    experiment: str | Path
    site: str | None = None
    overrides: tuple[str, ...] = ()
    template_dirs: tuple[str, ...] = ()
    output_dir: str | Path | None = None
    script_only: bool = False
    cwd: Path | None = None


@dataclass(frozen=True)
class RenderResult:
    """A rendered experiment.

    Attributes:
        rendered: The script and the job it was rendered from.
        manifest: Whether the job's scheduler renders a manifest too.
        text: What to print (the script or the manifest); ``None`` when the files were written.
        written: The files written into ``output_dir``, in order (the script, then the manifest).
    """

    rendered: RenderedScript
    manifest: bool
    text: str | None
    written: tuple[Path, ...] = field(default=())


def render_request(request: RenderRequest, packed: PackedRenderer | None = None) -> RenderResult:
    """Render the request's experiment, and write it when it names an output folder.

    Args:
        request: What to render and where it goes.
        packed: The packed renderer (:func:`hpcjobs.sweep.prepare.render_packed`); ``None``: single jobs only.

    Raises:
        ConfigError: Anything wrong with the experiment, its sweep, the site, or a manifest's ``#K8S`` lines.
    """
    from hpcjobs.render.script import render_experiment
    from hpcjobs.schedulers.registry import capabilities_of

    rendered = packed(request.experiment, site=request.site, overrides=request.overrides,
                      template_dirs=request.template_dirs) if packed is not None else None
    if rendered is None:
        rendered = render_experiment(request.experiment, site=request.site, overrides=request.overrides,
                                     template_dirs=request.template_dirs)
    manifest = capabilities_of(rendered.job.scheduler).renders_manifest
    cwd = request.cwd if request.cwd is not None else Path.cwd()
    if request.output_dir:  # "" as None: no folder
        from hpcjobs.output import write_user_file
        from hpcjobs.safe_files import refuse_special_target, user_folder

        folder = user_folder(request.output_dir, what="--output-dir")
        files = [(folder / rendered.filename, rendered.text, 0o700)]
        if manifest:
            from hpcjobs.render.manifest import manifest_yaml

            files.append((folder / f"{rendered.job.name}.k8s.yaml", manifest_yaml(rendered, cwd), None))
        for path, _text, _mode in files:  # every target checked before the first is written
            refuse_special_target(path, what="--output-dir")
        written = [write_user_file(path, text, what="--output-dir", mode=mode) for path, text, mode in files]
        return RenderResult(rendered, manifest, None, tuple(written))
    if manifest and not request.script_only:
        from hpcjobs.render.manifest import manifest_yaml

        return RenderResult(rendered, manifest, manifest_yaml(rendered, cwd))
    return RenderResult(rendered, manifest, rendered.text)


__all__ = ["PackedRenderer", "RenderRequest", "RenderResult", "render_request"]
