"""Pure parsers for Torque output (no pandas): ``qstat -x`` XML, Torque exit codes, arrays.

Torque's ``qstat -f`` text and accounting lines have the PBS layout and are parsed by
:mod:`hpcjobs.schedulers.pbs.formats`; what differs lives here (github.com/adaptivecomputing/torque:
``src/include/pbs_job.h``, ``src/server/accounting.c``):

* ``qstat -x`` means XML in Torque (in PBS Pro it means "include finished jobs"): one line
  ``<Data><Job><Job_Id>..</Job_Id>..</Job></Data>``, optionally preceded by ``<?xml version="1.0"?>``,
  times as epoch strings, ``Resource_List``/``resources_used`` as nested elements;
* ``job_state`` ``C`` (completed) with lower-case ``exit_status``;
* negative exit codes: -10 memory, -11 walltime, -12 cput over limit (PBS Pro uses -10/-11 for
  other things);
* arrays: parent ``673175[].srv`` (``job_array_request``), subjobs ``673175[19].srv`` with
  ``job_array_id`` and ``PBS_ARRAYID`` in ``Variable_List``.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from hpcjobs import states
from hpcjobs.errors import SchedulerOutputError
from hpcjobs.schedulers.base import JobStatus
from hpcjobs.schedulers.pbs.formats import (
    derive_final_state,
    job_status_from_attrs,
    parse_qstat_full,
    split_variable_list,
)
from hpcjobs.units import is_ascii_digits

#: Torque ``JOB_EXEC_*`` codes (src/include/pbs_job.h, 4.x/6.x) → normalised state.
TORQUE_NEGATIVE_EXIT: dict[int, str] = {
    -1: states.FAILED,  # FAIL1
    -2: states.FAILED,  # FAIL2
    -3: states.REQUEUED,  # RETRY
    -4: states.FAILED,  # INITABT
    -5: states.FAILED,  # INITRST
    -6: states.FAILED,  # INITRMG
    -7: states.FAILED,  # BADRESRT
    -8: states.FAILED,  # CMDFAIL: exec of the user command failed
    -9: states.FAILED,  # STDOUTFAIL: cannot create stdout/stderr
    -10: states.OUT_OF_MEMORY,  # OVERLIMIT_MEM
    -11: states.TIMEOUT,  # OVERLIMIT_WT
    -12: states.TIMEOUT,  # OVERLIMIT_CPUT
    -13: states.REQUEUED,  # RETRY_CGROUP
}


def derive_torque_final_state(
    exit_status: int | None,
    *,
    comment: str | None = None,
    walltime_used_s: int | None = None,
    walltime_limit_s: int | None = None,
    deleted: bool = False,
) -> tuple[str, int | None, int | None]:
    """The end state of a completed Torque job: PBS rules for 0, 1-255 and 256+N (271 = SIGTERM:
    TIMEOUT when the used walltime reached the limit, else CANCELLED) with Torque's negative codes.

    Returns:
        ``(state, exit_code, exit_signal)``, see :func:`hpcjobs.schedulers.pbs.formats.derive_final_state`.
    """
    return derive_final_state(
        exit_status,
        comment=comment,
        walltime_used_s=walltime_used_s,
        walltime_limit_s=walltime_limit_s,
        deleted=deleted,
        negative_codes=TORQUE_NEGATIVE_EXIT,
    )


_XML_DECL_RE = re.compile(r"<\?xml[^>]*\?>")
#: A document type declaration, the only place XML declares entities (Torque's qstat -x never writes one).
_DOCTYPE_RE = re.compile(r"<!(DOCTYPE|ENTITY)\b")


def _element_value(elem: ET.Element) -> Any:
    children = list(elem)
    if children:
        return {child.tag: (child.text or "") for child in children}
    text = elem.text or ""
    return split_variable_list(text) if elem.tag == "Variable_List" else text


def parse_qstat_xml(text: str) -> dict[str, dict[str, Any]]:
    """Parse Torque ``qstat -x`` XML into ``{job_id: attributes}`` (the shape of PBS JSON).

    Accepts output with or without the ``<?xml version="1.0"?>`` line and several ``<Data>``
    documents in a row (one per operand). Values stay strings (times are epoch strings);
    ``Resource_List``/``resources_used`` become dicts and ``Variable_List`` is split into a dict.

    Raises:
        SchedulerOutputError: When the text is not well-formed XML, or has a DOCTYPE (entity declarations are
            refused, never expanded).
    """
    body = _XML_DECL_RE.sub("", text).strip()
    if not body:
        return {}
    doctype = _DOCTYPE_RE.search(text)
    if doctype:  # entities are never expanded: a billion-laughs document is refused, not parsed
        line = text.count("\n", 0, doctype.start()) + 1
        raise SchedulerOutputError(f"the XML has a <!{doctype[1]}> declaration (line {line}), which Torque's qstat -x "
                                   "never writes; XML with a DOCTYPE or entities is not read")
    try:
        root = ET.fromstring(f"<qstat>{body}</qstat>")
    except ET.ParseError as exc:
        raise SchedulerOutputError(f"invalid XML: {exc}") from exc
    jobs: dict[str, dict[str, Any]] = {}
    for job in root.iter("Job"):
        attrs = {child.tag: _element_value(child) for child in job}
        job_id = attrs.pop("Job_Id", None)
        if isinstance(job_id, str) and job_id:
            jobs[job_id] = attrs
    return jobs


def torque_status_argv(job_ids: Sequence[str]) -> list[str]:
    """``qstat -f -x -t <ids...>``: Torque's full XML status (completed jobs appear as ``C`` for
    ``keep_completed`` seconds; there is no history option). ``-t`` expands array summaries.

    Raises:
        ValueError: When ``job_ids`` is empty.
    """
    if not job_ids:
        raise ValueError("torque_status_argv needs at least one job id")
    return ["qstat", "-f", "-x", "-t", "--", *job_ids]


def torque_job_status(job_id: str, attrs: Mapping[str, Any]) -> JobStatus:
    """One :class:`JobStatus` from a Torque job's attributes (XML or ``-f`` text)."""
    status = job_status_from_attrs(job_id, attrs, derive_torque_final_state)
    if status.array_task_id is None:
        variables = attrs.get("Variable_List")
        arrayid = variables.get("PBS_ARRAYID") if isinstance(variables, Mapping) else None
        if arrayid is not None and is_ascii_digits(str(arrayid)):
            status = replace(status, array_task_id=int(arrayid))
    return status


def parse_torque_xml_status(stdout: str) -> list[JobStatus]:
    """Job statuses from Torque ``qstat -f -x`` XML.

    Raises:
        SchedulerOutputError: When the output is not well-formed XML.
    """
    return [torque_job_status(jid, attrs) for jid, attrs in parse_qstat_xml(stdout).items()]


def parse_torque_text_status(stdout: str) -> list[JobStatus]:
    """Job statuses from Torque ``qstat -f`` text (same layout as PBS Pro, Torque exit codes)."""
    return [torque_job_status(jid, attrs) for jid, attrs in parse_qstat_full(stdout).items()]
