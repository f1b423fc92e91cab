// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// Where the collateral contract reads who is who on the subnet. In production this is
/// SubtensorStakeSource (contracts/SubtensorStakeSource.sol) over subtensor's UID-lookup and
/// metagraph precompiles; tests plug doubles of those precompiles under the same adapter.
interface IStakeSource {
    /// The subnet hotkey (32-byte public key) that `account` is associated with on chain, and that
    /// hotkey's stake when it holds a validator permit (0 otherwise). (0, 0): no association.
    function accountOf(address account) external view returns (bytes32 hotkey, uint256 validatorStake);

    /// The total stake of the subnet's validator-permitted hotkeys.
    function totalValidatorStake() external view returns (uint256);
}

/// Collateral per miner hotkey, slashed only by a quorum of validator stake, once per incident,
/// with the slash of a failed rental paid to the renter of that lease.
///
/// Rules (docs/collateral.md): a deposit is one per miner hotkey (validators size what it must
/// cover by the GPUs they proved, so a miner has no identity of its own choosing to split), owned
/// by the EVM address that made it, which must be associated with the hotkey; only that owner may
/// top up, ask a reclaim and receive it; a reclaim waits `reclaimDelay` and never completes while
/// a slash proposal against the deposit is open and unexpired (a pending slash wins; an expired
/// one blocks nothing). A proposal names (miner, kind, incident, renter, GPUs): the incident is
/// what happened (a failed lease, a cheat in a window), not the evidence document, so every
/// validator's evidence of one incident counts toward one proposal, and an incident slashes at
/// most once (`incidentUsed`). Opening a proposal costs the opener `openBond`, returned when the
/// slash executes and owed to the deposit's owner when the proposal expires unexecuted. A slash
/// executes when validators holding at least `kappaBps` of the total validator stake attested,
/// each hotkey counted once at its stake at execution time; the n-th slash of a deposit takes
/// min(deposit, GPUs x ratePerGpuDay x 2^(n-1)), and a slash of nothing never executes.
/// Compensation, bonds and the remainder are owed (pull payments), never pushed. There is no owner
/// and no admin function: nobody but a deposit's owner, a renter, an opener or the configured
/// remainder address can receive funds.
contract Collateral {
    uint8 public constant KIND_FAILED_RENTAL = 0;
    uint8 public constant KIND_CHEAT = 1;
    uint256 public constant WEI_PER_RAO = 1e9; // subtensor converts EVM wei to rao by dividing by 1e9
    uint256 public constant MAX_GPUS = 64;
    uint256 public constant MAX_DOUBLINGS = 5; // the 6th and later slashes take 32 days of rent (capped)
    uint256 public constant MAX_ATTESTERS = 256;

    IStakeSource public immutable stakeSource;
    uint256 public immutable ratePerGpuDay; // wei: one day of rent of one proven GPU
    uint256 public immutable minDeposit; // wei: the smallest first deposit
    uint64 public immutable reclaimDelay; // seconds between asking a reclaim and receiving it
    uint64 public immutable proposalTtl; // seconds a slash proposal stays open after it is opened
    uint16 public immutable kappaBps; // share of total validator stake a slash needs (5000 = one half)
    uint16 public immutable renterShareBps; // share of a failed rental's slash owed to its renter
    address public immutable remainderTo; // the rest of a slash: owed to this address, or burned if zero
    uint256 public immutable openBond; // wei an opener stakes on its proposal reaching the quorum

    struct Deposit {
        address owner;
        uint64 reclaimAt; // when the pending reclaim may be finalized (0: none pending)
        uint32 openProposals; // slash proposals against this deposit not yet executed or closed
        uint64 blockedUntil; // the latest expiry of a proposal opened against it
        uint32 slashes; // executed slashes: the escalation count
        uint256 amount; // wei held
        uint256 pendingReclaim; // wei asked back
    }

    struct Proposal {
        bytes32 hotkey; // the miner: its deposit
        bytes32 incident; // what happened (a failed lease, a cheat in a window)
        address renter;
        uint64 expiresAt;
        uint16 gpus;
        uint8 kind;
        uint8 state; // 0 none, 1 open, 2 executed, 3 expired
        address opener; // paid the bond of the current opening
        uint32 openings; // how many times it was opened (an expired proposal may be opened again)
        uint256 attestedStake; // sum of stakes read at attestation (a hint; execution re-reads)
        uint256 totalAtOpen; // total validator stake when opened (a hint; execution re-reads)
        address[] attesters;
        bytes32[] attesterHotkeys;
    }

    mapping(bytes32 => Deposit) private _deposits;
    mapping(bytes32 => Proposal) private _proposals;
    mapping(bytes32 => mapping(bytes32 => uint32)) public attestedIn; // proposal => validator hotkey => opening
    mapping(bytes32 => bool) public incidentUsed; // incidentKey(miner, incident) => slashed
    mapping(address => uint256) public owed; // compensation, bonds and remainders, claimed by their owner
    uint256 public burned; // wei locked here forever (no function can move it)
    uint256 private _entered = 1;

    event Deposited(bytes32 indexed hotkey, address indexed owner, uint256 amount, uint256 total);
    event ReclaimRequested(bytes32 indexed hotkey, address indexed owner, uint256 amount, uint64 reclaimAt);
    event ReclaimCancelled(bytes32 indexed hotkey, address indexed owner);
    event Reclaimed(bytes32 indexed hotkey, address indexed owner, uint256 amount, uint256 remaining);
    event SlashProposed(bytes32 indexed proposal, bytes32 indexed hotkey, bytes32 indexed incident, uint8 kind, address renter, uint16 gpus, uint64 expiresAt, address opener);
    event Attested(bytes32 indexed proposal, bytes32 indexed validatorHotkey, bytes32 indexed evidenceHash, address validator, uint256 stake);
    event Slashed(bytes32 indexed proposal, bytes32 indexed hotkey, bytes32 indexed incident, uint256 amount, address renter, uint256 toRenter, uint256 remainder, uint32 slashes);
    event ProposalExpired(bytes32 indexed proposal, bytes32 indexed hotkey, address bondTo);
    event Claimed(address indexed account, uint256 amount);

    error BadConfig(string what);
    error BadAmount();
    error BelowMinimum(uint256 minimum);
    error NotAssociated();
    error NotOwner();
    error NotValidator();
    error BadKind();
    error BadRenter();
    error BadGpus();
    error BadIncident();
    error IncidentUsed();
    error NothingToSlash();
    error BondRequired(uint256 bond);
    error AlreadyAttested();
    error ProposalClosed();
    error ProposalNotExpired();
    error TooManyAttesters();
    error NoQuorum(uint256 attestedStake, uint256 totalStake);
    error ReclaimPending();
    error NoReclaim();
    error ReclaimTooEarly(uint64 reclaimAt);
    error SlashPending(uint32 openProposals, uint64 blockedUntil);
    error NothingOwed();
    error TransferFailed();
    error Reentrancy();
    error DirectPayment();

    modifier nonReentrant() {
        if (_entered != 1) revert Reentrancy();
        _entered = 2;
        _;
        _entered = 1;
    }

    constructor(
        IStakeSource stakeSource_,
        uint256 ratePerGpuDay_,
        uint256 minDeposit_,
        uint64 reclaimDelay_,
        uint64 proposalTtl_,
        uint16 kappaBps_,
        uint16 renterShareBps_,
        address remainderTo_,
        uint256 openBond_
    ) {
        if (address(stakeSource_) == address(0)) revert BadConfig("stake source");
        if (ratePerGpuDay_ == 0 || ratePerGpuDay_ % WEI_PER_RAO != 0) revert BadConfig("rate");
        if (minDeposit_ == 0 || minDeposit_ % WEI_PER_RAO != 0) revert BadConfig("minimum deposit");
        if (reclaimDelay_ == 0 || proposalTtl_ == 0) revert BadConfig("delays");
        if (kappaBps_ == 0 || kappaBps_ > 10_000) revert BadConfig("kappa");
        if (renterShareBps_ > 10_000) revert BadConfig("renter share");
        if (openBond_ == 0 || openBond_ % WEI_PER_RAO != 0) revert BadConfig("bond");
        stakeSource = stakeSource_;
        ratePerGpuDay = ratePerGpuDay_;
        minDeposit = minDeposit_;
        reclaimDelay = reclaimDelay_;
        proposalTtl = proposalTtl_;
        kappaBps = kappaBps_;
        renterShareBps = renterShareBps_;
        remainderTo = remainderTo_;
        openBond = openBond_;
    }

    receive() external payable {
        revert DirectPayment();
    }

    fallback() external payable {
        revert DirectPayment();
    }

    // ------------------------------------------------------------------ views

    function proposalId(bytes32 hotkey, uint8 kind, bytes32 incident, address renter, uint16 gpus)
        public
        pure
        returns (bytes32)
    {
        return keccak256(abi.encode(hotkey, kind, incident, renter, gpus));
    }

    /// The key `incidentUsed` is kept under: an incident is the miner's own (no slash of one
    /// miner can use up another miner's incident).
    function incidentKey(bytes32 hotkey, bytes32 incident) public pure returns (bytes32) {
        return keccak256(abi.encode(hotkey, incident));
    }

    /// The collateral a miner with `gpus` proven GPUs is asked for: one day of their rent.
    function required(uint256 gpus) external view returns (uint256) {
        return gpus * ratePerGpuDay;
    }

    function depositOf(bytes32 hotkey) external view returns (Deposit memory) {
        return _deposits[hotkey];
    }

    /// What the next slash of this deposit would take for `gpus` GPUs.
    function nextSlashAmount(bytes32 hotkey, uint16 gpus) public view returns (uint256) {
        Deposit storage d = _deposits[hotkey];
        uint256 doublings = d.slashes < MAX_DOUBLINGS ? d.slashes : MAX_DOUBLINGS;
        uint256 amount = uint256(gpus) * ratePerGpuDay * (uint256(1) << doublings);
        return amount < d.amount ? amount : d.amount;
    }

    function proposalOf(bytes32 id)
        external
        view
        returns (
            bytes32 hotkey,
            address renter,
            uint64 expiresAt,
            uint16 gpus,
            uint8 kind,
            uint8 state,
            uint256 attesters,
            address opener,
            uint32 openings
        )
    {
        Proposal storage p = _proposals[id];
        return (p.hotkey, p.renter, p.expiresAt, p.gpus, p.kind, p.state, p.attesters.length, p.opener, p.openings);
    }

    /// Stake of the proposal's attesters now (each hotkey once, only while still associated) and the total.
    function tally(bytes32 id) public view returns (uint256 attestedStake, uint256 totalStake) {
        Proposal storage p = _proposals[id];
        for (uint256 i = 0; i < p.attesters.length; i++) {
            (bytes32 hotkey, uint256 stake) = stakeSource.accountOf(p.attesters[i]);
            if (hotkey == p.attesterHotkeys[i]) attestedStake += stake;
        }
        totalStake = stakeSource.totalValidatorStake();
    }

    // ------------------------------------------------------------------ miner

    /// Deposit (or top up) the collateral of the sender's associated hotkey.
    function deposit() external payable nonReentrant {
        if (msg.value == 0 || msg.value % WEI_PER_RAO != 0) revert BadAmount();
        (bytes32 hotkey,) = stakeSource.accountOf(msg.sender);
        if (hotkey == bytes32(0)) revert NotAssociated();
        Deposit storage d = _deposits[hotkey];
        if (d.owner != msg.sender) {
            if (d.amount != 0) revert NotOwner();
            d.owner = msg.sender; // an emptied deposit may move to the hotkey's new EVM address
        }
        uint256 total = d.amount + msg.value;
        if (total < minDeposit) revert BelowMinimum(minDeposit);
        d.amount = total;
        emit Deposited(hotkey, msg.sender, msg.value, total);
    }

    /// Ask `amount` back; it can be finalized `reclaimDelay` seconds later if no slash is pending.
    function requestReclaim(bytes32 hotkey, uint256 amount) external nonReentrant {
        Deposit storage d = _deposits[hotkey];
        if (d.owner != msg.sender) revert NotOwner();
        if (amount == 0 || amount % WEI_PER_RAO != 0 || amount > d.amount) revert BadAmount();
        if (d.pendingReclaim != 0) revert ReclaimPending();
        uint64 at = uint64(block.timestamp) + reclaimDelay;
        d.pendingReclaim = amount;
        d.reclaimAt = at;
        emit ReclaimRequested(hotkey, msg.sender, amount, at);
    }

    function cancelReclaim(bytes32 hotkey) external nonReentrant {
        Deposit storage d = _deposits[hotkey];
        if (d.owner != msg.sender) revert NotOwner();
        if (d.pendingReclaim == 0) revert NoReclaim();
        d.pendingReclaim = 0;
        d.reclaimAt = 0;
        emit ReclaimCancelled(hotkey, msg.sender);
    }

    /// Pay the pending reclaim to the owner: after the delay, with no unexpired slash proposal
    /// open against the deposit, at most what is left.
    function finalizeReclaim(bytes32 hotkey) external nonReentrant {
        Deposit storage d = _deposits[hotkey];
        if (d.owner != msg.sender) revert NotOwner();
        if (d.pendingReclaim == 0) revert NoReclaim();
        if (block.timestamp < d.reclaimAt) revert ReclaimTooEarly(d.reclaimAt);
        if (d.openProposals != 0 && block.timestamp <= d.blockedUntil) {
            revert SlashPending(d.openProposals, d.blockedUntil);
        }
        uint256 pay = d.pendingReclaim < d.amount ? d.pendingReclaim : d.amount;
        d.amount -= pay;
        d.pendingReclaim = 0;
        d.reclaimAt = 0;
        emit Reclaimed(hotkey, msg.sender, pay, d.amount);
        _send(msg.sender, pay);
    }

    // ------------------------------------------------------------------ validators

    /// Attest a slash proposal on the evidence `evidenceHash` (kept in the event: who attested on
    /// what); the attestation that brings the quorum executes it. Opening a proposal (a new one,
    /// or one whose last opening expired) carries `openBond` as its value; attesting an open one
    /// carries none.
    function attest(bytes32 hotkey, uint8 kind, bytes32 incident, bytes32 evidenceHash, address renter, uint16 gpus)
        external
        payable
        nonReentrant
        returns (bool executed)
    {
        (bytes32 validatorHotkey, uint256 stake) = stakeSource.accountOf(msg.sender);
        if (validatorHotkey == bytes32(0) || stake == 0) revert NotValidator();
        bytes32 id = proposalId(hotkey, kind, incident, renter, gpus);
        Proposal storage p = _proposals[id];
        if (p.state == 2) revert ProposalClosed();
        if (p.state == 1 && block.timestamp > p.expiresAt) _close(p, id);
        if (p.state != 1) {
            if (msg.value != openBond) revert BondRequired(openBond);
            _open(p, id, hotkey, kind, incident, renter, gpus);
        } else if (msg.value != 0) {
            revert BadAmount();
        }
        uint32 opening = p.openings;
        if (attestedIn[id][validatorHotkey] == opening) revert AlreadyAttested();
        if (p.attesters.length >= MAX_ATTESTERS) revert TooManyAttesters();
        attestedIn[id][validatorHotkey] = opening;
        p.attesters.push(msg.sender);
        p.attesterHotkeys.push(validatorHotkey);
        p.attestedStake += stake;
        emit Attested(id, validatorHotkey, evidenceHash, msg.sender, stake);
        // Cheap test on the hints first; only an attestation that may complete the quorum pays
        // for re-reading every attester's stake and the total now (the binding check).
        if (_quorum(p.attestedStake, p.totalAtOpen)) {
            (uint256 now_, uint256 totalNow) = tally(id);
            if (_quorum(now_, totalNow)) {
                _execute(p, id, incident);
                return true;
            }
        }
        return false;
    }

    /// Execute a proposal whose attesters hold the quorum now (after stakes moved); anyone may call.
    function execute(bytes32 hotkey, uint8 kind, bytes32 incident, address renter, uint16 gpus)
        external
        nonReentrant
    {
        bytes32 id = proposalId(hotkey, kind, incident, renter, gpus);
        Proposal storage p = _proposals[id];
        if (p.state != 1 || block.timestamp > p.expiresAt) revert ProposalClosed();
        (uint256 attestedStake, uint256 totalStake) = tally(id);
        if (!_quorum(attestedStake, totalStake)) revert NoQuorum(attestedStake, totalStake);
        _execute(p, id, incident);
    }

    /// Close a proposal that did not reach the quorum in time (its bond is owed to the deposit's
    /// owner), or one whose incident another proposal slashed (the opener was right: its bond
    /// back). Anyone may call; an expired proposal blocks no reclaim even before it is closed.
    function expire(bytes32 id) external nonReentrant {
        Proposal storage p = _proposals[id];
        if (p.state != 1) revert ProposalClosed();
        if (incidentUsed[incidentKey(p.hotkey, p.incident)]) {
            p.state = 3;
            _deposits[p.hotkey].openProposals -= 1;
            owed[p.opener] += openBond;
            emit ProposalExpired(id, p.hotkey, p.opener);
            return;
        }
        if (block.timestamp <= p.expiresAt) revert ProposalNotExpired();
        _close(p, id);
    }

    // ------------------------------------------------------------------ renters, openers, the remainder

    /// Pay the sender what it is owed (compensation, a bond, a remainder). Nobody can claim for another.
    function claim() external nonReentrant {
        uint256 amount = owed[msg.sender];
        if (amount == 0) revert NothingOwed();
        owed[msg.sender] = 0;
        emit Claimed(msg.sender, amount);
        _send(msg.sender, amount);
    }

    // ------------------------------------------------------------------ internals

    function _open(
        Proposal storage p,
        bytes32 id,
        bytes32 hotkey,
        uint8 kind,
        bytes32 incident,
        address renter,
        uint16 gpus
    ) private {
        if (kind > KIND_CHEAT) revert BadKind();
        if (kind == KIND_FAILED_RENTAL ? renter == address(0) : renter != address(0)) revert BadRenter();
        if (gpus == 0 || gpus > MAX_GPUS) revert BadGpus();
        if (incident == bytes32(0)) revert BadIncident();
        if (incidentUsed[incidentKey(hotkey, incident)]) revert IncidentUsed();
        Deposit storage d = _deposits[hotkey];
        if (d.amount == 0) revert NothingToSlash();
        uint64 expiresAt = uint64(block.timestamp) + proposalTtl;
        if (p.openings != 0) {
            delete p.attesters; // a fresh opening counts fresh attestations only
            delete p.attesterHotkeys;
            p.attestedStake = 0;
        } else {
            p.hotkey = hotkey;
            p.incident = incident;
            p.renter = renter;
            p.gpus = gpus;
            p.kind = kind;
        }
        p.expiresAt = expiresAt;
        p.state = 1;
        p.opener = msg.sender;
        p.openings += 1;
        p.totalAtOpen = stakeSource.totalValidatorStake();
        d.openProposals += 1;
        if (expiresAt > d.blockedUntil) d.blockedUntil = expiresAt;
        emit SlashProposed(id, hotkey, incident, kind, renter, gpus, expiresAt, msg.sender);
    }

    function _close(Proposal storage p, bytes32 id) private {
        Deposit storage d = _deposits[p.hotkey];
        p.state = 3;
        d.openProposals -= 1;
        owed[d.owner] += openBond; // the opener's bond: what blocking the owner's reclaim cost
        emit ProposalExpired(id, p.hotkey, d.owner);
    }

    function _quorum(uint256 attestedStake, uint256 totalStake) private view returns (bool) {
        return totalStake != 0 && attestedStake * 10_000 >= uint256(kappaBps) * totalStake;
    }

    function _execute(Proposal storage p, bytes32 id, bytes32 incident) private {
        bytes32 used = incidentKey(p.hotkey, incident);
        if (incidentUsed[used]) revert IncidentUsed(); // another proposal on it executed first
        Deposit storage d = _deposits[p.hotkey];
        uint256 doublings = d.slashes < MAX_DOUBLINGS ? d.slashes : MAX_DOUBLINGS;
        uint256 amount = uint256(p.gpus) * ratePerGpuDay * (uint256(1) << doublings);
        if (amount > d.amount) amount = d.amount;
        if (amount == 0) revert NothingToSlash(); // a slash of nothing never executes nor escalates
        p.state = 2;
        incidentUsed[used] = true;
        d.openProposals -= 1;
        d.slashes += 1;
        d.amount -= amount;
        if (d.pendingReclaim > d.amount) d.pendingReclaim = d.amount; // the slash wins over a reclaim
        owed[p.opener] += openBond; // the opener was right: its bond back
        uint256 toRenter = 0;
        if (p.kind == KIND_FAILED_RENTAL) {
            toRenter = (amount * renterShareBps) / 10_000;
            owed[p.renter] += toRenter;
        }
        uint256 remainder = amount - toRenter;
        if (remainderTo == address(0)) {
            burned += remainder;
        } else {
            owed[remainderTo] += remainder;
        }
        emit Slashed(id, p.hotkey, incident, amount, p.renter, toRenter, remainder, d.slashes);
    }

    function _send(address to, uint256 amount) private {
        (bool ok,) = payable(to).call{value: amount}("");
        if (!ok) revert TransferFailed();
    }
}
