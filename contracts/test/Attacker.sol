// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

interface ICollateral {
    function deposit(bytes32 machine) external payable;
    function requestReclaim(bytes32 hotkey, bytes32 machine, uint256 amount) external;
    function finalizeReclaim(bytes32 hotkey, bytes32 machine) external;
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
    bytes32 private _machine;

    constructor(ICollateral target_) {
        target = target_;
    }

    function setMode(uint8 mode_) external {
        mode = mode_;
    }

    function deposit(bytes32 machine) external payable {
        target.deposit{value: msg.value}(machine);
    }

    function reclaim(bytes32 hotkey, bytes32 machine, uint256 amount) external {
        target.requestReclaim(hotkey, machine, amount);
    }

    function finalize(bytes32 hotkey, bytes32 machine) external {
        _hotkey = hotkey;
        _machine = machine;
        target.finalizeReclaim(hotkey, machine);
    }

    function claim() external {
        target.claim();
    }

    receive() external payable {
        if (mode == 3) revert("no thanks");
        if (mode == 1) {
            try target.finalizeReclaim(_hotkey, _machine) {
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
