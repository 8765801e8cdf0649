# The naive single-stage Dockerfile a user writes with pip: the stack's top-level pins, one
# RUN, no hashes, no bytecode step. bench/reproducible.py builds it on the same base as
# envgen's, cold, to compare: docker build --build-arg BASE=... --build-arg PINS="torch==..." .
# (the context holds ca.crt: the CA bundle a naive user copies in for pip to reach the index)
ARG BASE
FROM ${BASE}
ARG PINS
COPY ca.crt /ca.crt
ENV PIP_CERT=/ca.crt
RUN python3 -m venv /opt/venv && /opt/venv/bin/pip install --no-cache-dir --progress-bar off ${PINS}
