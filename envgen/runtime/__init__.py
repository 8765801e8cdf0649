"""The engines that run images (Docker, Apptainer), registries, and the host's GPUs."""
