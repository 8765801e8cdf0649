"""Certification across a fleet: which stacks on which GPU targets (spec), written as Slurm
job arrays (slurm) or Kubernetes Jobs (kubernetes), each task printing its certificate as
one `envgen-certificate: {...}` line (task, pod). envgen schedules nothing itself."""
