# The naive single-stage Dockerfile a user writes with uv: pip installs uv, uv installs the
# stack's top-level pins (resolving their dependencies itself), one RUN, no hashes, no
# bytecode step (uv's default). bench/reproducible.py builds it on the same base as envgen's,
# cold, to compare: docker build --build-arg BASE=... --build-arg PINS="torch==..." .
ARG BASE
FROM ${BASE}
ARG PINS
# --compile-bytecode, for the comparison with the same bytecode guarantee as envgen's
ARG UV_FLAGS=""
COPY ca.crt /ca.crt
ENV PIP_CERT=/ca.crt SSL_CERT_FILE=/ca.crt
RUN python3 -m venv /opt/venv && /opt/venv/bin/pip install --no-cache-dir --progress-bar off uv==0.13.9 \
 && /opt/venv/bin/uv pip install --no-cache --python /opt/venv/bin/python ${UV_FLAGS} ${PINS}
