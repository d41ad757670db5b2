# turngate's image: docs/deploying.md (Image). Build: `docker build -t turngate:0.1.0 .`
# BASE_IMAGE is an official Python image by tag; pin it by digest for reproducible builds, e.g.
# --build-arg BASE_IMAGE=python:3.12-slim@sha256:<digest>. Both stages must use the same base.
ARG BASE_IMAGE=python:3.12-slim

FROM ${BASE_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# The distributions' metadata and code only (.dockerignore keeps tests, docs and caches out).
COPY pyproject.toml hatch_build.py README.md constraints.txt ./
COPY clients/ clients/
COPY service/ service/
# Wheels of both distributions and every dependency, at the versions CI tested (constraints.txt,
# as .ci/run installs them), then a venv installed from them alone.
RUN python3 -m venv /opt/turngate \
 && /opt/turngate/bin/pip wheel --constraint constraints.txt --wheel-dir /wheels ./clients . \
 && /opt/turngate/bin/pip install --no-index --find-links /wheels turngate \
 && /opt/turngate/bin/pip uninstall --yes pip setuptools

FROM ${BASE_IMAGE}
ARG VERSION=0.1.0
# Where the source lives; pass the real one (e.g. `git remote get-url origin`) when publishing.
ARG SOURCE_URL=https://github.com/turngate/turngate
LABEL org.opencontainers.image.title="turngate" \
      org.opencontainers.image.description="Single-turn admission, guarded Stop and a live, resumable view of AI-agent sessions, over gRPC." \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="${SOURCE_URL}" \
      org.opencontainers.image.licenses="Apache-2.0"
# A fixed uid/gid, so volumes and securityContext (runAsUser: 10001) agree across rebuilds.
RUN groupadd --gid 10001 turngate \
 && useradd --uid 10001 --gid turngate --no-create-home --home-dir /var/lib/turngate --shell /usr/sbin/nologin turngate \
 && mkdir -p /var/lib/turngate \
 && chown turngate:turngate /var/lib/turngate
COPY --from=builder /opt/turngate /opt/turngate
ENV PATH=/opt/turngate/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    TURNGATE_LISTEN=0.0.0.0:50051 \
    TURNGATE_METRICS_LISTEN=0.0.0.0:9464 \
    TURNGATE_STORE=sqlite+aiosqlite:////var/lib/turngate/turngate.db \
    TURNGATE_WORKERS=auto
USER 10001:10001
WORKDIR /var/lib/turngate
VOLUME ["/var/lib/turngate"]
EXPOSE 50051 9464
STOPSIGNAL SIGTERM
# The gRPC health protocol, by the server's own command: probes TURNGATE_LISTEN from inside.
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 CMD ["turngate", "health", "--timeout", "3"]
ENTRYPOINT ["turngate"]
CMD ["serve"]
