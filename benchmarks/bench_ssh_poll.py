"""Round trips per status poll of a sweep submitted over SSH, on the real Slurm testbed behind the SSH testbed.

Goal: one round trip (one SSH session over the shared ControlMaster connection) per status poll, whatever
the number of points. The sweep (10,000 points by default: 100 arrays of 100 tasks under the testbed's
MaxArraySize of 101; its MaxJobCount of 10,000 makes the last arrays wait for room) is submitted from this
machine as from a laptop, to the SSH testbed's login user, and polled every two seconds until every point
is finished. Two cases cost a second session in a poll: a job Slurm's accounting does not know yet is
asked of ``squeue`` (``--hold`` holds every job two hours with ``--begin``, and slurmctld sends such a job
to accounting only once it may start), and packed points' exit files are read there (``--pack N``).
Prints figures; asserts nothing.

Needs (as root) ``bash tests/ssh/testbed.sh start`` and ``TESTBED_USERS=hpcssh bash tests/slurm/testbed.sh
start``. Run::

    python benchmarks/bench_ssh_poll.py               # 10,000 points
    python benchmarks/bench_ssh_poll.py --points 1000 --pack 10
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SSH_CONFIG = Path("/var/lib/hpcjobs-testbed/ssh/client/ssh_config")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=10_000)
    parser.add_argument("--polls", type=int, default=200, help="most polls")
    parser.add_argument("--pack", type=int, default=1, help="points a task (packed: the exit files are read "
                        "in a second session of a poll once tasks end)")
    parser.add_argument("--hold", action="store_true", help="hold every job (the squeue fallback); 5 polls")
    args = parser.parse_args()
    if not SSH_CONFIG.is_file():
        print(f"no SSH testbed ({SSH_CONFIG} is missing): run `sudo bash tests/ssh/testbed.sh start`")
        return 1

    import yaml

    from hpcjobs import transport
    from hpcjobs.sweep.api import cancel_sweep, run_sweep, sweep_status

    with tempfile.TemporaryDirectory(prefix="hpcjobs-bench-ssh-") as tmp:
        laptop = Path(tmp)
        site = yaml.safe_load((ROOT / "tests" / "sites" / "hpctest.yaml").read_text())
        site.update(name="bench-remote", directives=["--begin=now+2hours"] if args.hold else [],
                    remote={"host": "hpcjobs-ssh-testbed", "ssh_config": str(SSH_CONFIG),
                            "workdir": f"hpcjobs-bench/{os.getpid()}"})
        (laptop / "site.yaml").write_text(yaml.safe_dump(site))
        side = max(1, int(args.points ** 0.5))
        rest = max(1, args.points // side)
        (laptop / "exp.yaml").write_text(
            f"name: bench-ssh-{os.getpid()}\nresources: {{walltime: 5m}}\ncommand: echo $x $seed\n"
            + (f"pack: {{sequential: {args.pack}}}\n" if args.pack > 1 else "")
            + f"sweep:\n  max_points: {side * rest}\n  grid:\n    x: {list(range(side))}\n"
            + f"    seed: {list(range(rest))}\n")
        os.chdir(laptop)
        with transport.scope():  # one connection for the whole benchmark, as one command run has
            start = time.perf_counter()
            prepared, report = run_sweep(laptop / "exp.yaml", site=str(laptop / "site.yaml"))
            submit_s = time.perf_counter() - start
            session = transport.session()
            commands: list[str] = []
            run_script = session.run_script

            def counted(script: str, *, shown: list[str], **kwargs: object) -> object:
                commands.append(shown[0] if shown else "?")
                return run_script(script, shown=shown, **kwargs)

            session.run_script = counted  # type: ignore[method-assign]
            print(f"points: {len(prepared.points):,}; submitted in {report.chunks_submitted} array job(s), "
                  f"{submit_s:.2f} s, {session.sessions} SSH sessions over {session.masters} connection(s)")
            trips: list[int] = []
            for poll in range(1, (5 if args.hold else args.polls) + 1):
                before = session.sessions
                commands.clear()
                start = time.perf_counter()
                status = sweep_status(prepared.sweep_id, points_limit=0)
                seconds = time.perf_counter() - start
                trips.append(session.sessions - before)
                print(f"poll {poll}: {trips[-1]} round trip(s) (SSH sessions: {', '.join(commands)}), "
                      f"{seconds * 1000:.0f} ms; {status.counts}")
                if status.finished == status.total:
                    break
                time.sleep(2)
            mean = sum(trips) / len(trips)
            print(f"round trips per poll: mean {mean:.2f}, most {max(trips)}, over {len(trips)} polls")
            cancel_sweep(prepared.sweep_id)
            print(f"connections opened in all: {session.masters}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
