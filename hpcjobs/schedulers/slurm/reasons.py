"""Slurm's pending reasons in plain words, and what would change each.

The codes are Slurm's (https://slurm.schedmd.com/job_reason_codes.html, and the JOB REASON CODES of
``squeue(1)``); the words are hpcjobs'. Exact codes come first; the families of limit codes
(``AssocGrp*``, ``AssocMax*``, ``QOSGrp*``, ``QOSMax*``, ``Max*PerAccount``) are explained from the
resource and scope their name spells (``QOSMaxGRESPerUser``: the QOS's per-user limit of GRES).
"""

from __future__ import annotations

import re

from hpcjobs.schedulers.pending import Reason, ReasonKind

SOURCE = "https://slurm.schedmd.com/job_reason_codes.html"

_EXACT: dict[str, tuple[str, str, ReasonKind]] = {
    "Priority": ("jobs with a higher priority are waiting for the same partition (or reservation) and go first",
                 "wait; a smaller or shorter request may be backfilled earlier (see `hpcjobs plan`)", "wait"),
    "Resources": ("the job is next, but the nodes, CPUs, memory or GPUs it asks for are in use by other jobs",
                  "wait for them to be freed; the expected start below is Slurm's estimate", "wait"),
    "None": ("the scheduler has not looked at the job yet (it was submitted a moment ago)",
             "wait a scheduling cycle; ask again in a minute", "wait"),
    "Dependency": ("the job waits for the jobs named in its dependency to reach the state it asks for",
                   "wait for those jobs; `scontrol show job ID` shows them", "dependency"),
    "DependencyNeverSatisfied": ("a job this one depends on ended in a way that can never satisfy the dependency "
                                 "(an afterok upstream failed), so this job will never start",
                                 "cancel it (hpcjobs cancels such jobs of a pipeline) or fix and resubmit the "
                                 "upstream, then resubmit this one", "dependency"),
    "BeginTime": ("the job asked not to start before a given time (--begin) and that time has not come",
                  "wait, or `scontrol update job=ID StartTime=now`", "hold"),
    "JobHeldUser": ("the job was held by its owner (`scontrol hold`, or submitted with --hold)",
                    "`scontrol release ID`", "hold"),
    "JobHeldAdmin": ("an administrator held the job", "ask the cluster's administrators to release it", "hold"),
    "PartitionTimeLimit": ("the job's time limit is longer than its partition allows; it cannot start there",
                           "lower its time limit (`scontrol update job=ID TimeLimit=...`) or move it to a "
                           "partition that allows it", "request"),
    "PartitionNodeLimit": ("the job asks for more (or fewer) nodes than its partition allows",
                           "change the node count or the partition", "request"),
    "PartitionDown": ("the job's partition is down", "wait for it to come back, or move the job to another "
                      "partition", "cluster"),
    "PartitionInactive": ("the job's partition is not scheduling jobs", "wait, or move the job to another partition",
                          "cluster"),
    "PartitionConfig": ("the request does not fit how the partition is configured (CPUs, memory or GPUs per "
                        "node)", "change the request to fit one of the partition's nodes", "request"),
    "ReqNodeNotAvail": ("a node the job needs is not available (down, drained or reserved, e.g. for maintenance)",
                        "wait for it, or exclude it (--exclude) if the job does not need that node", "cluster"),
    "Reservation": ("the job waits for its advanced reservation to start", "wait for the reservation", "hold"),
    "ReqNodeNotAvail, Reserved for maintenance": ("the nodes are reserved for maintenance",
                                                  "wait for the maintenance to end, or shorten the job so that "
                                                  "it ends before it", "cluster"),
    "BadConstraints": ("the job's constraints (--constraint, features) cannot be met by any node",
                       "change the constraints", "request"),
    "InvalidAccount": ("the job's account is not valid for the user", "submit with one of your accounts "
                       "(`sacctmgr show assoc user=$USER`)", "request"),
    "InvalidQOS": ("the job's QOS is not valid for the user or account", "submit with a QOS you may use", "request"),
    "QOSNotAllowed": ("the job's QOS is not allowed on its partition", "use a QOS the partition allows", "request"),
    "AccountNotAllowed": ("the job's account is not allowed on its partition", "use an allowed account or "
                          "partition", "request"),
    "NodeDown": ("a node the job needs is down", "wait for it", "cluster"),
    "Licenses": ("the licenses the job asks for are in use", "wait for them", "wait"),
    "launch failed requeued held": ("the job failed to launch, was requeued and held",
                                    "look at the job's logs, then `scontrol release ID`", "hold"),
    "JobArrayTaskLimit": ("the array's own limit on tasks running at once (--array=...%N) is reached",
                          "wait for tasks to finish, or raise it (`scontrol update job=ID ArrayTaskThrottle=N`)",
                          "limit"),
    "AccountingPolicy": ("a limit of the accounting policy (the user's, account's or QOS's) is reached",
                         "wait for your other jobs to finish", "limit"),
    "FrontEndDown": ("no front end node is available to run the job", "wait", "cluster"),
    "Cleaning": ("the job is being requeued and is still cleaning up its previous run", "wait", "wait"),
    "Prolog": ("the job's prolog is running", "wait", "wait"),
    "SchedDefer": ("the scheduler defers jobs at submission (SchedulerParameters=defer)", "wait a cycle", "wait"),
    "BurstBufferResources": ("the burst buffer space the job asks for is in use", "wait", "wait"),
    "BurstBufferStageIn": ("the job's burst buffer is being staged in", "wait", "wait"),
}

#: What the middle of a limit code names.
_RESOURCES = {"Cpu": "CPUs", "CPU": "CPUs", "Mem": "memory", "Node": "nodes", "GRES": "GPUs or other GRES",
              "Jobs": "running jobs", "SubmitJob": "submitted jobs", "Wall": "wall time", "Energy": "energy",
              "BB": "burst buffer", "License": "licenses", "Billing": "billing units"}
_LIMIT = re.compile(r"(?P<who>Assoc|QOS)?(?P<kind>Grp|Max)(?P<what>[A-Za-z]+?)(?P<run>RunMinutes|Minutes)?"
                    r"(?P<scope>PerUser|PerAccount|PerJob|PerNode|PerMinJob|PerJobTime)?(?:Limit)?")


def explain_reason(code: str) -> Reason:
    """``code`` (an ``squeue`` reason) explained; an unknown code says it is not explained, not a guess."""
    code = code.strip()
    exact = _EXACT.get(code)
    if exact is not None:
        return Reason(code, exact[0], exact[1], exact[2], SOURCE)
    limit = _limit_reason(code)
    if limit is not None:
        return limit
    return Reason(code, f"Slurm gives the reason {code!r}, which hpcjobs does not explain",
                  f"see {SOURCE} (and `scontrol show job ID`)", "other", SOURCE)


def _limit_reason(code: str) -> Reason | None:
    match = _LIMIT.fullmatch(code)
    if match is None or not (match.group("who") or match.group("scope")):
        return None
    resource = next((words for key, words in _RESOURCES.items() if match.group("what").startswith(key)), None)
    if resource is None:
        return None
    who = {"Assoc": "your association (user and account)", "QOS": "the job's QOS"}.get(match.group("who") or "",
                                                                                     "the job's QOS")
    scope = {"PerUser": " per user", "PerAccount": " per account", "PerJob": " per job", "PerNode": " per node",
             "PerMinJob": " per job", "PerJobTime": " per job"}.get(match.group("scope") or "", "")
    minutes = " x minutes" if match.group("run") else ""
    if match.group("kind") == "Grp":
        return Reason(code, f"{who} has reached its limit on {resource}{minutes} in use by all its jobs together"
                      f"{scope}", "wait for jobs of the group to finish; or use another account or QOS", "limit",
                      SOURCE)
    if match.group("scope") in ("PerJob", "PerNode", "PerMinJob", "PerJobTime"):
        return Reason(code, f"the job asks for more {resource}{scope} than {who} allows; it cannot start as asked",
                      "ask for less, or use a QOS or account with a higher limit", "request", SOURCE)
    return Reason(code, f"{who} limits the {resource}{minutes}{scope}, and your other jobs use all of it now",
                  "wait for your other jobs to finish (the limit and its use are below)", "limit", SOURCE)


__all__ = ["SOURCE", "explain_reason"]
