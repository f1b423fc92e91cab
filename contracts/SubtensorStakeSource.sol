// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {IStakeSource} from "./Collateral.sol";

/// subtensor's metagraph precompile (address 0x0000000000000000000000000000000000000802).
interface IMetagraph {
    function getUidCount(uint16 netuid) external view returns (uint16);
    function getStake(uint16 netuid, uint16 uid) external view returns (uint64);
    function getValidatorStatus(uint16 netuid, uint16 uid) external view returns (bool);
    function getHotkey(uint16 netuid, uint16 uid) external view returns (bytes32);
}

struct LookupItem {
    uint16 uid;
    uint64 block_associated;
}

/// subtensor's UID-lookup precompile (address 0x0000000000000000000000000000000000000806): the
/// uids whose hotkey associated this EVM address (extrinsic `associate_evm_key`).
interface IUidLookup {
    function uidLookup(uint16 netuid, address evm_address, uint16 limit) external view returns (LookupItem[] memory);
}

/// The production stake source: who an EVM address is, and validator stake, read from the chain
/// itself. Precompile addresses are constructor arguments so tests can run this same code over
/// doubles (contracts/test/Doubles.sol); on subtensor pass 0x...0802 and 0x...0806.
contract SubtensorStakeSource is IStakeSource {
    uint16 public immutable netuid;
    IMetagraph public immutable metagraph;
    IUidLookup public immutable uidLookup;

    constructor(uint16 netuid_, IMetagraph metagraph_, IUidLookup uidLookup_) {
        netuid = netuid_;
        metagraph = metagraph_;
        uidLookup = uidLookup_;
    }

    function accountOf(address account) external view returns (bytes32 hotkey, uint256 validatorStake) {
        LookupItem[] memory items = uidLookup.uidLookup(netuid, account, 1);
        if (items.length == 0) return (bytes32(0), 0);
        uint16 uid = items[0].uid;
        hotkey = metagraph.getHotkey(netuid, uid);
        if (metagraph.getValidatorStatus(netuid, uid)) validatorStake = metagraph.getStake(netuid, uid);
    }

    function totalValidatorStake() external view returns (uint256 total) {
        uint16 count = metagraph.getUidCount(netuid);
        for (uint16 uid = 0; uid < count; uid++) {
            if (metagraph.getValidatorStatus(netuid, uid)) total += metagraph.getStake(netuid, uid);
        }
    }
}
