# falcon-gpu image: `falcon-gpu run` as the entrypoint (README "Deploy on Kubernetes").
# Needs BuildKit (the default builder since Docker 23) for RUN --mount.
#   docker build -t falcon-gpu:0.1.0 .
#   docker run --rm --gpus all falcon-gpu:0.1.0 --once                 # one cycle to stdout
#   docker run --rm falcon-gpu:0.1.0 --simulate --once                 # no GPU: the simulator
# Stage 1 builds wheels for falcon-gpu and every dependency (a compiler is there for any dependency
# without a wheel for this platform); stage 2 installs only those wheels into a venv, offline, on a
# slim base without compilers. tests/deploy/test_image.py installs the same way into a fresh venv.
ARG PYTHON_VERSION=3.11

FROM python:${PYTHON_VERSION} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY falcon_gpu ./falcon_gpu
RUN python -m pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:${PYTHON_VERSION}-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/falcon-gpu/bin:$PATH \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=utility \
    FALCON_GPU_LISTEN=0.0.0.0:9410
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    python -m venv /opt/falcon-gpu \
    && /opt/falcon-gpu/bin/pip install --no-cache-dir --no-index --find-links /wheels falcon-gpu \
    && useradd --system --user-group --uid 10001 --no-create-home --shell /usr/sbin/nologin falcon-gpu \
    && install -d -o falcon-gpu -g falcon-gpu -m 0700 /var/lib/falcon-gpu
# Non-root by default: NVML opens /dev/nvidia* (world read-write on a standard driver install) and
# reads /proc/<pid>/cgroup (world-readable). Pod attribution on Kubernetes also reads the kubelet's
# pod-resources socket, which is root-only (0600): conf/kubernetes runs the container as UID 0
# with every capability dropped.
USER 10001
EXPOSE 9410
STOPSIGNAL SIGTERM
ENTRYPOINT ["falcon-gpu", "run"]
