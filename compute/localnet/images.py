"""Which lease image the demo's Docker miners use: one that works on this host, or a clear refusal.

The production image (``compute-base:cuda``) needs the NVIDIA container runtime; on a CPU host
every lease of it fails. So ``auto`` picks the CUDA image only where the engine has the nvidia
runtime and the image is built, and the CPU test image (``compute-base:cpu``) everywhere else.
A missing image is refused before any process starts, with the command that builds it.
"""

from __future__ import annotations

import logging

from compute.miner.service import image_present
from compute.specs import collect_docker

from .network import LocalnetError

log = logging.getLogger(__name__)

CUDA_IMAGE = "compute-base:cuda"
CPU_IMAGE = "compute-base:cpu"
BUILD_HINT = {
    CUDA_IMAGE: "docker build -f docker/Dockerfile -t compute-base:cuda .",
    CPU_IMAGE: "sudo bash scripts/build_base_image.sh",
}


def choose_lease_image(requested: str = "auto") -> str:
    """The image for the demo's Docker miners (``requested`` unless ``auto``); LocalnetError if unusable."""
    docker = collect_docker(timeout_s=5.0)
    if not docker.available:
        raise LocalnetError(
            f"--backend docker: Docker is not reachable ({docker.error}); start the engine "
            "(scripts/ci_docker.sh does) or use --backend embedded"
        )
    if requested != "auto":
        image = requested
    elif docker.nvidia_runtime and image_present(CUDA_IMAGE):
        image = CUDA_IMAGE
    else:
        image = CPU_IMAGE
    if image == CUDA_IMAGE and not docker.nvidia_runtime:
        raise LocalnetError(
            f"{CUDA_IMAGE} needs the NVIDIA container runtime, which this Docker engine lacks; "
            f"use --base-image auto (picks {CPU_IMAGE} here)"
        )
    if not image_present(image):
        hint = BUILD_HINT.get(image, f"docker pull {image}")
        raise LocalnetError(f"lease image {image} is not on this Docker engine; build it with `{hint}`")
    log.info("lease image %s (nvidia runtime: %s)", image, "yes" if docker.nvidia_runtime else "no, CPU host")
    return image
