# The naive single-stage Dockerfile a team writes for its requirements file with uv: pip
# installs uv, uv resolves and installs the file as written, one RUN, no hashes, no bytecode
# step (uv's default). bench/reproducible.py --project builds it on the same base as envgen's
# project image, cold, to compare: docker build --build-arg BASE=... . (the context holds
# requirements.txt and ca.crt, the CA bundle a team copies in for the index)
ARG BASE
FROM ${BASE}
COPY ca.crt /ca.crt
COPY requirements.txt /requirements.txt
ENV PIP_CERT=/ca.crt SSL_CERT_FILE=/ca.crt
RUN python3 -m venv /opt/venv && /opt/venv/bin/pip install --no-cache-dir --progress-bar off uv==0.13.9 \
 && /opt/venv/bin/uv pip install --no-cache --python /opt/venv/bin/python -r /requirements.txt
