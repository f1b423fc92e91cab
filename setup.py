from pathlib import Path

from setuptools import find_packages, setup

here = Path(__file__).parent
requirements = [
    line.strip()
    for line in (here / "requirements.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
]

COLLATERAL = [
    "web3>=7.12,<8",
    "eth-tester[py-evm]>=0.13.0b1,<0.14",
    "eth-account>=0.13,<0.14",
]

setup(
    name="compute-subnet",
    version="0.1.0",
    description="Bittensor compute subnet: Proof-of-GPU verified, rentable GPU machines",
    long_description=(here / "README.md").read_text() if (here / "README.md").exists() else "",
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=["compute", "compute.*", "neurons"]),
    package_data={"compute": ["py.typed", "collateral/artifacts/*.json"]},
    include_package_data=True,
    install_requires=requirements,
    extras_require={
        # the collateral contract's client (web3) and the local EVM of tests and the demo
        # (eth-tester on py-evm); eth-account stays inside bittensor 11.3's pin (<0.14)
        "collateral": COLLATERAL,
        # torch is the miner's GPU path; the validator needs no torch (numba, its compiled verifier and
        # the miner's CPU generator, is a runtime requirement: requirements.txt).
        # triton: the fused GPU input generator (compute/pog/gpu_gen.py); torch falls back without it
        "miner": [
            "torch>=2.3",
            "triton>=3.2,<4; platform_system == 'Linux' and platform_machine == 'x86_64'",
        ],
        "dev": [
            *COLLATERAL,
            "pytest>=8,<10",
            "pytest-asyncio>=0.23,<2",
            "pytest-timeout>=2.3,<3",
            "pytest-xdist>=3.5,<4",  # .ci/run's slow lane runs on workers (mostly waiting: rounds, SSH, Docker)
            "hypothesis>=6.100,<7",
            "ruff>=0.5",
            "mypy>=1.10",
            "types-PyYAML",
            # the miner's torch path stays under test; this exact pin resolves to the CI machine's local
            # CPU wheel (any other spec downloads GBs of CUDA wheels)
            "torch==2.13.0",
            # runs the fused generator kernel on CPU (TRITON_INTERPRET=1) in tests: ~290 MB wheel, ~1 min
            "triton>=3.2,<4; platform_system == 'Linux' and platform_machine == 'x86_64'",
        ],
    },
)
