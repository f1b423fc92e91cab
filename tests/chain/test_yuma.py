"""Yuma consensus against tables worked by hand (the arithmetic is in each test's comments)."""

from __future__ import annotations

import numpy as np
import pytest

from compute.chain.sim import SimChainState
from compute.chain.sim.epoch import epoch_inputs, run_epoch
from compute.chain.sim.yuma import YumaError, cosine, weighted_median_col, yuma_epoch


def _three_validators_two_miners() -> tuple[np.ndarray, np.ndarray]:
    # uids 0..2 validators (stake 50/30/20), uids 3..4 miners (no stake)
    stake = np.array([50.0, 30.0, 20.0, 0.0, 0.0])
    w = np.zeros((5, 5))
    w[0, 3:] = [0.6, 0.4]
    w[1, 3:] = [0.5, 0.5]
    w[2, 3:] = [0.9, 0.1]
    return stake, w


def test_hand_worked_epoch_three_validators_two_miners() -> None:
    stake, w = _three_validators_two_miners()
    r = yuma_epoch(stake, w)
    # S = [.5, .3, .2]
    # C_3: weights desc 0.9 (v2, cum .2), 0.6 (v0, cum .7 >= .5) -> 0.6
    # C_4: weights desc 0.5 (v1, cum .3), 0.4 (v0, cum .8 >= .5) -> 0.4
    assert r.consensus[3:] == pytest.approx([0.6, 0.4])
    # clipped rows: v0 [.6 .4] -> 1.0; v1 [.5 .4] -> 0.9; v2 [.6 .1] -> 0.7
    assert r.validator_trust[:3] == pytest.approx([1.0, 0.9, 0.7])
    # ranks: m3 = .5*.6 + .3*.5 + .2*.6 = .57 ; m4 = .5*.4 + .3*.4 + .2*.1 = .34 ; sum .91
    assert r.ranks[3:] == pytest.approx([0.57, 0.34])
    assert r.incentive[3:] == pytest.approx([0.57 / 0.91, 0.34 / 0.91])
    # preranks: m3 = .3 + .15 + .18 = .63 ; m4 = .2 + .15 + .02 = .37
    assert r.trust[3:] == pytest.approx([0.57 / 0.63, 0.34 / 0.37])
    # bonds (penalty 1, fresh): column-normalised S_i * Wc_ij
    #   m3: [.30 .15 .12]/.57 ; m4: [.20 .12 .02]/.34
    assert r.bonds[:3, 3] == pytest.approx([0.30 / 0.57, 0.15 / 0.57, 0.12 / 0.57])
    assert r.bonds[:3, 4] == pytest.approx([0.20 / 0.34, 0.12 / 0.34, 0.02 / 0.34])
    # dividends D_i = sum_j B_ij I_j = S_i VT_i / sum R: [.5, .27, .14] / .91
    assert r.dividends[:3] == pytest.approx([0.5 / 0.91, 0.27 / 0.91, 0.14 / 0.91])
    assert r.incentive[:3] == pytest.approx([0, 0, 0])


def test_scale_self_weights_and_non_permit_rows_do_not_matter() -> None:
    stake, w = _three_validators_two_miners()
    base = yuma_epoch(stake, w)
    noisy = w * 65535  # u16 scale, as stored on chain
    noisy[0, 0] = 1e6  # a self-weight: masked by the chain
    noisy[3, 4] = 1e6  # a miner (no permit) voting: ignored
    permit = [True, True, True, False, False]
    other = yuma_epoch(stake * 1e9, noisy, permit)
    assert other.consensus == pytest.approx(base.consensus)
    assert other.validator_trust == pytest.approx(base.validator_trust)
    assert other.incentive == pytest.approx(base.incentive)


def test_agreeing_validators_keep_full_trust() -> None:
    # everyone sets [.2 .3 .5]: consensus is that vector, nothing clipped, trust 1 everywhere
    stake = np.array([5.0, 3.0, 2.0, 0, 0, 0])
    w = np.zeros((6, 6))
    w[:3, 3:] = [0.2, 0.3, 0.5]
    r = yuma_epoch(stake, w)
    assert r.consensus[3:] == pytest.approx([0.2, 0.3, 0.5])
    assert r.validator_trust[:3] == pytest.approx([1, 1, 1])
    assert r.incentive[3:] == pytest.approx([0.2, 0.3, 0.5])
    assert r.trust[3:] == pytest.approx([1, 1, 1])


def test_a_minority_validator_pushing_its_own_miner_is_clipped_to_zero() -> None:
    # stakes .4/.4/.2; v0, v1: [.5 .5 0]; v2 (colluding with miner 5): [0 0 1]
    # C_5: desc 1.0 (v2, cum .2), 0 (cum .6) -> 0 ; v2 keeps nothing: trust 0, miner 5 earns 0
    stake = np.array([4.0, 4.0, 2.0, 0, 0, 0])
    w = np.zeros((6, 6))
    w[0, 3:] = w[1, 3:] = [0.5, 0.5, 0.0]
    w[2, 3:] = [0.0, 0.0, 1.0]
    r = yuma_epoch(stake, w)
    assert r.consensus[3:] == pytest.approx([0.5, 0.5, 0.0])
    assert r.validator_trust[:3] == pytest.approx([1.0, 1.0, 0.0])
    assert r.incentive[3:] == pytest.approx([0.5, 0.5, 0.0])
    assert r.dividends[2] == pytest.approx(0.0)


def test_kappa_is_the_stake_quantile() -> None:
    # one column, weights .9/.5/.1 held by stakes .2/.3/.5
    # support of >= .9: .2 ; >= .5: .5 ; >= .1: 1.0
    stake = np.array([0.2, 0.3, 0.5])
    col = np.array([[0.9], [0.5], [0.1]])
    assert weighted_median_col(stake, col, 0.2)[0] == pytest.approx(0.9)
    assert weighted_median_col(stake, col, 0.5)[0] == pytest.approx(0.5)
    assert weighted_median_col(stake, col, 0.51)[0] == pytest.approx(0.1)
    assert weighted_median_col(np.zeros(3), col, 0.5)[0] == 0.0


def test_bonds_move_by_alpha_from_the_previous_epoch() -> None:
    stake, w = _three_validators_two_miners()
    prev = np.zeros((5, 5))
    prev[2, 3] = prev[2, 4] = 1.0  # last epoch v2 held every bond
    r = yuma_epoch(stake, w, bonds_prev=prev, bond_alpha=0.1)
    # m3: .1 * [.30 .15 .12]/.57 + .9 * [0 0 1] (column sum 1, already normalised)
    assert r.bonds[:3, 3] == pytest.approx([0.1 * 0.30 / 0.57, 0.1 * 0.15 / 0.57, 0.1 * 0.12 / 0.57 + 0.9])


def test_bad_inputs_are_refused_with_a_clear_error() -> None:
    with pytest.raises(YumaError, match="shape|must be"):
        yuma_epoch([1.0, 2.0], np.zeros((3, 3)))
    with pytest.raises(YumaError, match="non-negative"):
        yuma_epoch([1.0, -1.0], np.zeros((2, 2)))
    with pytest.raises(YumaError, match="finite"):
        yuma_epoch([1.0, 1.0], np.array([[0, np.nan], [0, 0]]))
    with pytest.raises(YumaError, match="kappa"):
        yuma_epoch([1.0, 1.0], np.zeros((2, 2)), kappa=0.0)


def test_nobody_voting_gives_zeros_not_nans() -> None:
    r = yuma_epoch([1.0, 1.0, 0.0], np.zeros((3, 3)))
    for vector in (r.consensus, r.validator_trust, r.incentive, r.dividends, r.trust):
        assert np.all(np.isfinite(vector)) and not vector.any()


def test_cosine() -> None:
    assert cosine([1, 0], [1, 0]) == pytest.approx(1.0)
    assert cosine([1, 0], [0, 1]) == pytest.approx(0.0)
    assert cosine([0, 0], [1, 0]) == 0.0
    assert cosine([3, 4], [6, 8]) == pytest.approx(1.0)


def test_epoch_reads_the_simulated_chain(tmp_path) -> None:
    state = SimChainState.create(tmp_path / "chain.db", netuid=27, weights_rate_limit=0)
    for i, stake in enumerate((50.0, 30.0, 20.0)):
        state.register(f"v{i}", f"c{i}", stake, validator_permit=True)
    state.register("m3", "cm3", 10.0)
    state.register("m4", "cm4", 10.0)
    _, w = _three_validators_two_miners()
    for i in range(3):
        values = [int(round(x * 65535 / max(w[i]))) for x in w[i, 3:]]
        state.set_weights(27, f"v{i}", [3, 4], values, version_key=0)
    stake, weights, permit = epoch_inputs(state, 27)
    assert stake == pytest.approx([50, 30, 20, 10, 10])
    assert list(permit) == [True, True, True, False, False]
    r = run_epoch(state, 27)
    assert r.consensus[3:] == pytest.approx([0.6, 0.4], abs=1e-4)  # u16 rounding
    assert r.validator_trust[:3] == pytest.approx([1.0, 0.9, 0.7], abs=1e-4)
