// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {LookupItem} from "../SubtensorStakeSource.sol";

/// Test and local-demo double of subtensor's metagraph precompile: a settable metagraph.
/// Its deployer mirrors the (simulated) chain into it; it holds no funds.
contract MetagraphDouble {
    struct Neuron {
        bytes32 hotkey;
        uint64 stake;
        bool validator;
    }

    address public immutable keeper;
    Neuron[] private _neurons;

    constructor() {
        keeper = msg.sender;
    }

    function setNeuron(uint16 uid, bytes32 hotkey, uint64 stake, bool validator) external {
        require(msg.sender == keeper, "keeper only");
        while (_neurons.length <= uid) _neurons.push();
        _neurons[uid] = Neuron(hotkey, stake, validator);
    }

    function getUidCount(uint16) external view returns (uint16) {
        return uint16(_neurons.length);
    }

    function getStake(uint16, uint16 uid) external view returns (uint64) {
        return _neurons[uid].stake;
    }

    function getValidatorStatus(uint16, uint16 uid) external view returns (bool) {
        return _neurons[uid].validator;
    }

    function getHotkey(uint16, uint16 uid) external view returns (bytes32) {
        return _neurons[uid].hotkey;
    }
}

/// Test and local-demo double of subtensor's UID-lookup precompile (associate_evm_key's result).
contract UidLookupDouble {
    address public immutable keeper;
    mapping(address => uint16) private _uid;
    mapping(address => bool) private _associated;

    constructor() {
        keeper = msg.sender;
    }

    function associate(address evm, uint16 uid) external {
        require(msg.sender == keeper, "keeper only");
        _uid[evm] = uid;
        _associated[evm] = true;
    }

    function dissociate(address evm) external {
        require(msg.sender == keeper, "keeper only");
        _associated[evm] = false;
    }

    function uidLookup(uint16, address evm, uint16 limit) external view returns (LookupItem[] memory items) {
        if (!_associated[evm] || limit == 0) return new LookupItem[](0);
        items = new LookupItem[](1);
        items[0] = LookupItem(_uid[evm], 1);
    }
}
