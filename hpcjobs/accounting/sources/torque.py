"""Torque job records → the normalised accounting DataFrame (:mod:`hpcjobs.accounting.schema`).

Sources: ``qstat -f -x`` XML (:func:`read_torque_qstat_xml`), ``qstat -f`` text
(:func:`read_torque_qstat_text`) and accounting logs (:func:`read_torque_accounting`), all with
``scheduler`` = ``torque``. Rows are built as for PBS Pro (:mod:`hpcjobs.accounting.sources.pbs`, whose
docstring explains the time-zone and rerun choices) with Torque's exit codes; XML times are
epoch seconds and need no zone. Torque accounting ``Q`` records carry only ``queue=``, so
submit/eligible/start come from the ``E`` record (a job deleted while queued, Q then D, is submitted at its
``Q`` record's time stamp, read in ``tz``); CPUs from ``total_execution_slots`` and nodes
from ``unique_node_count`` when PBS-style ``ncpus``/``nodect`` are absent.
"""

from __future__ import annotations

from datetime import tzinfo

import pandas as pd

from hpcjobs.accounting.sources.pbs import Source, accounting_rows, iter_source_lines, jobs_to_frame, rows_to_frame
from hpcjobs.schedulers.pbs import formats as pbs
from hpcjobs.schedulers.pbs import torque
from hpcjobs.skipped import Skipped, attach


def read_torque_qstat_xml(text: str, *, tz: tzinfo | str | None = None) -> pd.DataFrame:
    """Torque ``qstat -f -x`` XML → schema DataFrame.

    Args:
        text: The command's standard output (with or without the ``<?xml?>`` line).
        tz: Only used for ``ctime``-style strings, which Torque XML does not contain.

    Returns:
        A DataFrame conforming to :mod:`hpcjobs.accounting.schema`.

    Raises:
        SchedulerOutputError: When the output is not well-formed XML.
    """
    return jobs_to_frame(torque.parse_qstat_xml(text), scheduler="torque", tz=tz,
                         derive=torque.derive_torque_final_state)


def read_torque_qstat_text(text: str, *, tz: tzinfo | str | None = None) -> pd.DataFrame:
    """Torque ``qstat -f`` text → schema DataFrame.

    Args:
        text: The command's standard output.
        tz: Zone of the machine that ran qstat (times are ``ctime`` strings); ``None`` = here.

    Returns:
        A DataFrame conforming to :mod:`hpcjobs.accounting.schema`.
    """
    return jobs_to_frame(pbs.parse_qstat_full(text), scheduler="torque", tz=tz,
                         derive=torque.derive_torque_final_state)


def read_torque_accounting(
    source: Source,
    *,
    tz: tzinfo | str | None = None,
    include_unfinished: bool = False,
) -> pd.DataFrame:
    """Torque accounting logs → one schema row per job (from its last ``E`` record).

    Args:
        source: Accounting text, a file or directory path, or several of those.
        tz: Zone of the Torque server (line time stamps; used only for ``D``/``A`` end times);
            ``None`` = this machine's local zone.
        include_unfinished: Also return jobs with only ``Q``/``S`` records (PENDING/RUNNING).

    Returns:
        A DataFrame conforming to :mod:`hpcjobs.accounting.schema`, ``scheduler`` = ``torque``; what
        was not read is listed in ``df.attrs["skipped"]`` as for
        :func:`~hpcjobs.accounting.sources.pbs.read_pbs_accounting`.
    """
    skipped: list[Skipped] = []
    unfinished: list[str] = []
    records = pbs.iter_accounting_records(iter_source_lines(source), skipped)
    rows = accounting_rows(records, scheduler="torque", tz=tz, derive=torque.derive_torque_final_state,
                           include_unfinished=include_unfinished, skipped=skipped, unfinished=unfinished)
    df = attach(rows_to_frame(rows), sorted(skipped, key=lambda k: k.line or 0))
    df.attrs["unfinished"] = unfinished
    return df
