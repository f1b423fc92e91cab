"""The single-machine proof inside a validation lease: the GEMM proof, then the in-depth proofs,
in one SSH session. Used for a whole machine and for each host of a multi-host miner."""

from __future__ import annotations

from compute.protocol import GpuSpec, MachineSpecs
from compute.validator.check.context import MinerCheck
from compute.validator.check.lease import Lease, open_session
from compute.validator.failures import MinerFailed
from compute.validator.proofs.depth import DepthRejected
from compute.validator.proofs.depth_step import prove_depth
from compute.validator.proofs.evidence import Measured
from compute.validator.proofs.gemm import prove_gemm
from compute.validator.session.pog_session import PogSessionError

MAX_GPUS_TESTED = 16


async def prove_in_lease(
    check: MinerCheck, lease: Lease, claimed: list[GpuSpec], specs: MachineSpecs
) -> Measured:
    """What ``claimed`` proved in ``lease`` (``MinerFailed`` on a rejected or broken proof)."""
    params = check.params
    session = await open_session(lease, params, check.uid)
    async with session:
        try:
            measured, together = await prove_gemm(session, params, check.table, claimed, specs)
            await prove_depth(
                session, params, check.table, claimed, specs, check.previous, measured, together
            )
        except (PogSessionError, DepthRejected) as exc:
            raise MinerFailed(str(exc)) from None
    check.notes.gpu_uuids.update(measured.uuids)
    return measured
