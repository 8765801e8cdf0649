"""What every wing shares: the domain records, errors, files, ENVGEN_HOME, the checks of
the environment, terminal output."""
