// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

interface ICollateral {
    function deposit() external payable;
    function requestReclaim(bytes32 hotkey, uint256 amount) external;
    function finalizeReclaim(bytes32 hotkey) external;
    function claim() external;
}

/// A miner or renter contract that re-enters the collateral contract when it is paid.
/// `mode` 1: re-enter finalizeReclaim, 2: re-enter claim, 3: refuse payment (revert).
contract Attacker {
    ICollateral public immutable target;
    uint8 public mode;
    uint256 public reentries; // re-entrant calls that went through (must stay 0)
    uint256 public blocked; // re-entrant calls the target refused
    bytes32 private _hotkey;

    constructor(ICollateral target_) {
        target = target_;
    }

    function setMode(uint8 mode_) external {
        mode = mode_;
    }

    function deposit() external payable {
        target.deposit{value: msg.value}();
    }

    function reclaim(bytes32 hotkey, uint256 amount) external {
        target.requestReclaim(hotkey, amount);
    }

    function finalize(bytes32 hotkey) external {
        _hotkey = hotkey;
        target.finalizeReclaim(hotkey);
    }

    function claim() external {
        target.claim();
    }

    receive() external payable {
        if (mode == 3) revert("no thanks");
        if (mode == 1) {
            try target.finalizeReclaim(_hotkey) {
                reentries += 1;
            } catch {
                blocked += 1;
            }
        } else if (mode == 2) {
            try target.claim() {
                reentries += 1;
            } catch {
                blocked += 1;
            }
        }
    }
}
