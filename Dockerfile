# The watukuy runner image: `docker compose up` builds it (see docker-compose.yml). It also
# carries the vendor simulator (integration/simulator, aiohttp only) for the compose demo.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
# Only what the package build needs (pyproject names README.md as the long description).
COPY pyproject.toml README.md ./
COPY connector ./connector
# The Avro schemas: connector/watukuy/serde/schemas links to them, the wheel carries copies.
COPY schemas ./schemas
RUN pip install . && rm -rf /src

# The simulator runs as `python -m integration.simulator` from /opt/watukuy.
COPY integration/__init__.py /opt/watukuy/integration/__init__.py
COPY integration/simulator /opt/watukuy/integration/simulator

# GET / reports the commit it was built from: docker build --build-arg WATUKUY_COMMIT=$(git rev-parse HEAD)
ARG WATUKUY_COMMIT=unknown
ENV WATUKUY_COMMIT=${WATUKUY_COMMIT}

RUN useradd --system --uid 10001 --no-create-home watukuy
# runner.state.dir of config/compose.yaml and the Kubernetes ConfigMap: a volume mounted here
# starts owned by the runner's user (Docker copies this directory's owner into a new volume).
RUN mkdir -p /var/lib/watukuy && chown watukuy:watukuy /var/lib/watukuy
USER watukuy
WORKDIR /opt/watukuy
EXPOSE 8083

CMD ["watukuy-source", "--help"]
