# syntax=docker/dockerfile:1
# Images of gesscale for a k3s cluster, from the same locked dependencies as `make setup` (requirements-lock.txt,
# every package pinned and hash-checked). Two targets:
#   job         the Spark driver and executors: Java 17, pyspark, the job (`gesscale job run`), the executor entrypoint
#   controller  the autoscaler (`gesscale k8s run`), no Java, unprivileged user
# Multi-arch (Raspberry Pi arm64 and amd64) with buildx; the base image is a multi-arch manifest:
#   docker buildx build --platform linux/arm64,linux/amd64 --target job        -t REGISTRY/gesscale-job:0.1.0 --push .
#   docker buildx build --platform linux/arm64,linux/amd64 --target controller -t REGISTRY/gesscale-controller:0.1.0 --push .
# Then: gesscale k8s submit --image REGISTRY/gesscale-job:0.1.0 --controller-image REGISTRY/gesscale-controller:0.1.0
# docs/kubernetes.md says what of this was exercised (nothing was built here: no container engine).

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---- wheels: every locked package built or fetched once per platform, hashes checked -------------------------
FROM ${PYTHON_IMAGE} AS wheels
# Debian packages are not pinned (DL3008): bookworm's security updates replace old versions in the archive, so a
# pin would break the build within weeks; the Python packages, which decide behaviour, are pinned by the lock.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential libffi-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY requirements-lock.txt ./
# Some packages (crc32c on some platforms) are source distributions: built here, not in the runtime image.
RUN pip wheel --no-cache-dir --require-hashes --no-deps -r requirements-lock.txt -w /wheels
COPY pyproject.toml README.md ./
COPY gesscale gesscale
COPY netem netem
COPY producer producer
COPY jobs jobs
RUN pip wheel --no-cache-dir --no-deps . -w /wheels

# ---- base: the locked packages and gesscale, nothing fetched from an index ----------------------------------
FROM ${PYTHON_IMAGE} AS base
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN --mount=type=bind,from=wheels,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --no-deps /wheels/*.whl

# ---- job: driver and executors ---------------------------------------------------------------------------------
FROM base AS job
ARG TARGETARCH
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps tini \
    && rm -rf /var/lib/apt/lists/*
# Spark 4 runs on Java 17; pyspark's pip distribution is SPARK_HOME (its jars/ folder).
ENV JAVA_HOME=/usr/lib/jvm/java-17-openjdk-${TARGETARCH} \
    SPARK_HOME=/usr/local/lib/python3.11/site-packages/pyspark \
    PYSPARK_PYTHON=python3
COPY --chmod=0755 docker/job-entrypoint.sh /opt/gesscale/job-entrypoint.sh
# uid 185: the user of Spark's own images (volumes prepared for them fit this one too).
RUN useradd --uid 185 --gid 0 --home-dir /opt/gesscale --no-create-home spark
USER 185
WORKDIR /opt/gesscale
ENTRYPOINT ["/usr/bin/tini", "--", "/opt/gesscale/job-entrypoint.sh"]
CMD ["gesscale", "--help"]

# ---- controller --------------------------------------------------------------------------------------------------
FROM base AS controller
# uid 10001 = gesscale.k8s.controller.CONTROLLER_UID (the Deployment runs as it, with a read-only root).
RUN useradd --uid 10001 --gid 0 --no-create-home gesscale
USER 10001
ENTRYPOINT ["gesscale"]
CMD ["k8s", "run", "--help"]
