"""What the real 2-node ``torch.distributed`` tests on Docker Swarm and Kubernetes share.

The testbeds' image is an empty root that sees the host's ``/usr`` and ``/etc``; the tests run the
Python that runs pytest, so a copy of the site file (``tests/sites/swarm-dist.yaml`` or
``k8s-dist.yaml``) mounts that Python's prefix read-only and names its ``torchrun``. The job is
``examples/torch_ddp_allreduce.py`` under torchrun on 2 nodes (one process each, gloo): each rank
all-reduces its rank + 1 and prints a JSON line with the sum, 3.0.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import yaml

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
PROGRAM = ROOT / "examples" / "torch_ddp_allreduce.py"
EXPERIMENT = ("name: ddp2\nresources: {nodes: 2, cpus_per_task: 1, memory: 1G, walltime: 3m}\n"
              "launch: {launcher: torchrun, program: torch_ddp_allreduce.py, args: [--backend, gloo]}\n")


def python_prefixes() -> list[str]:
    """The folders this Python and its packages live in, outside ``/usr`` (which the sites mount already)."""
    import torch

    found: list[Path] = []
    for p in sorted({Path(sys.prefix), Path(sys.base_prefix), Path(torch.__file__).resolve().parents[1]},
                    key=lambda p: len(p.parts)):
        if not p.is_relative_to("/usr") and not any(p.is_relative_to(f) for f in found):
            found.append(p)
    return [str(p) for p in found]


def write_job(folder: Path, scheduler: str) -> tuple[Path, Path]:
    """The experiment and a site file for it in ``folder``: ``(experiment, site)``."""
    shutil.copy(PROGRAM, folder / PROGRAM.name)
    exp = folder / "ddp2.yaml"
    exp.write_text(EXPERIMENT)
    name = "swarm-dist" if scheduler == "swarm" else "k8s-dist"
    site = yaml.safe_load((TESTS / "sites" / f"{name}.yaml").read_text())
    site["name"] = f"{name}-torch"
    for prefix in python_prefixes():
        if scheduler == "swarm":
            site["swarm"]["mounts"].append({"source": prefix, "target": prefix, "readonly": True})
        else:
            site["kubernetes"]["volumes"].append({"host_path": prefix, "target": prefix, "readonly": True})
    site["distributed"] = {"torchrun": f"{sys.executable} -m torch.distributed.run"}
    path = folder / f"{name}-torch.yaml"
    path.write_text(yaml.safe_dump(site))
    return exp, path


def rank_reports(stdout: str) -> dict[int, float]:
    """``{rank: all-reduced value}`` of the JSON lines the ranks printed (lines may interleave)."""
    out: dict[int, float] = {}
    for text in re.findall(r"\{[^{}]*\}", stdout):
        report = json.loads(text)
        out[int(report["rank"])] = float(report["allreduce"])
    return out


#: A 2-node job whose rank 1 exits 5 (no launcher: the script exports RANK and the rest).
FAILING = ("name: dfail\nresources: {nodes: 2, cpus_per_task: 1, memory: 256M, walltime: 3m}\n"
           "command: |\n  echo \"rank $RANK of $WORLD_SIZE master $MASTER_ADDR:$MASTER_PORT\"\n"
           "  if [ \"$RANK\" = 1 ]; then exit 5; fi\n  sleep 2\n")
