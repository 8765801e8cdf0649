"""`envgen fleet FILE --slurm|--kubernetes`: certification across a fleet, through the
cluster's own scheduler."""
from __future__ import annotations

from pathlib import Path

from ..core.errors import CheckFailed, InputError
from ._common import load_matrix_for, out_json, table


def _fleet(args):
    from ..fleet.spec import default_resolver, load
    m = load_matrix_for(args)
    return load(args.file, m, default_resolver(m))


def _slurm(args, fleet) -> int:
    from ..fleet import slurm
    modes = [flag for flag, on in (("-o", args.output), ("--collect", args.collect),
                                   ("--resubmit-failed", args.resubmit_failed)) if on]
    if len(modes) > 1 or (args.submit and (args.collect or args.resubmit_failed)):
        both = modes if len(modes) > 1 else [*modes, "--submit"]
        raise InputError(f"{' and '.join(both)} are two things to do: give one (-o DIR "
                         f"[--submit] writes and submits, --collect DIR reads the verdicts, "
                         f"--resubmit-failed DIR sends back what failed)")
    folder = args.collect or args.resubmit_failed
    if folder:
        folder = Path(folder).resolve()
        if args.resubmit_failed:
            jobs = slurm.resubmit_failed(folder, fleet)
            if args.json:
                out_json({"folder": str(folder), "resubmitted": jobs})
            else:
                for j in jobs:
                    print(f"resubmitted {j['script']} tasks "
                          f"{','.join(map(str, j['indices']))} as job {j['job_id']}")
                if not jobs:
                    print("no failed or timed-out task to resubmit")
            return 0
        rows, source = slurm.verdicts(folder, fleet)
        stored = slurm.store_passed(folder, rows)
        counts = {v: sum(r["verdict"] == v for r in rows)
                  for v in ("passed", "failed", "timed out", "cancelled", "running", "missing")}
        if args.json:
            out_json({"folder": str(folder), "state_from": source, "tasks": rows,
                      "counts": counts, "stored": stored})
        else:
            print(table([[r["index"], r["stack"], r["target"], r["verdict"], r["state"] or "-",
                          r["job_id"] or "-"] for r in rows],
                        ["task", "stack", "target", "verdict", "slurm state", "job"]))
            print(", ".join(f"{n} {v}" for v, n in counts.items() if n) +
                  f" (state from {source}); {len(stored)} certificate(s) stored")
        if counts["passed"] != len(rows):
            if args.json:
                return CheckFailed.exit_code
            raise CheckFailed(f"{len(rows) - counts['passed']} of {len(rows)} task(s) did not "
                              f"pass")
        return 0
    if not args.output:
        raise InputError("envgen fleet --slurm needs -o DIR (or --collect DIR or "
                         "--resubmit-failed DIR)")
    slurm.check(fleet, args.engine)   # what Slurm cannot take (exit 2) before asking it
    if args.submit:   # before anything is written: a partition this cluster lacks
        slurm.check_partitions(fleet)
    written = slurm.write(fleet, Path(args.output), engine=args.engine, python=args.python)
    jobs = slurm.submit(Path(written["folder"]), fleet) if args.submit else []
    if args.json:
        out_json({**written, "submitted": jobs})
    else:
        print(f"{len(written['tasks'])} task(s) in {len(written['scripts'])} job array(s): "
              + ", ".join(written["scripts"]))
        for j in jobs:
            print(f"submitted {j['script']} as job {j['job_id']}")
        if not jobs:
            import shlex  # a line to paste: each path quoted as the shell reads it
            print(f"submit them with `envgen fleet {shlex.quote(str(args.file))} --slurm -o "
                  f"{shlex.quote(str(args.output))} --submit` (or, from "
                  f"{shlex.quote(str(args.output))}, `sbatch slurm/TARGET.sbatch`)")
    return 0


def _kubernetes(args, fleet) -> int:
    from ..fleet import kubernetes
    if not args.output:
        raise InputError("envgen fleet --kubernetes needs -o DIR")
    if args.submit or args.collect or args.resubmit_failed:
        raise InputError("--submit, --collect and --resubmit-failed are for --slurm; apply "
                         "the manifests with kubectl")
    written = kubernetes.write(fleet, Path(args.output))
    if args.json:
        out_json(written)
    else:
        print(f"{len(written['manifests'])} Job manifest(s) in {written['folder']}")
        for ref in written["unpushed"]:
            print(f"  warning: {ref} is only on this Docker daemon (no registry digest): push "
                  f"it (`envgen lock SPEC --push REGISTRY/TEAM`) so the nodes can pull it by "
                  f"digest, then write the manifests again")
        print(f"  apply: kubectl apply -f {written['folder']}")
        print("  read:  kubectl logs job/NAME | envgen certs import -")
    return 0


def run(args) -> int:
    fleet = _fleet(args)
    return _slurm(args, fleet) if args.scheduler == "slurm" else _kubernetes(args, fleet)
