"""Compile the Solidity sources under ``contracts/`` into the committed artifact, or check it.

The artifact (``compute/collateral/artifacts/contracts.json``: ABI and bytecode of every contract,
the compiler version and settings, the sha256 of each source) is what the package deploys and
calls; nothing compiles at run time. ``python -m compute collateral build`` rewrites it with
npm's ``solc`` (solcjs, the pinned :data:`SOLC_VERSION`) run by node; ``--check`` only compares.
The compiler is found in ``--solc.dir`` / ``$COMPUTE_SOLC_DIR`` (a folder holding
``node_modules/solc``, as made by ``npm install --prefix DIR solc@0.8.28``).

What it deliberately does not do: download a compiler (npm does that, once, outside), or touch
any chain.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from compute.collateral.errors import BuildError

SOLC_VERSION = "0.8.28"
REPO = Path(__file__).resolve().parents[2]
CONTRACTS_DIR = REPO / "contracts"
ARTIFACT = Path(__file__).resolve().parent / "artifacts" / "contracts.json"
DEFAULT_SOLC_DIRS = ("~/.cache/compute-solc", "/tmp/solc")
SETTINGS: dict[str, object] = {
    "optimizer": {"enabled": True, "runs": 200},
    # paris: no PUSH0, so the bytecode runs on EVMs that predate Shanghai as well as on newer ones
    "evmVersion": "paris",
    # no metadata hash or CBOR tail: the bytecode depends on the sources and settings only
    "metadata": {"bytecodeHash": "none", "appendCBOR": False},
    "outputSelection": {"*": {"*": ["abi", "evm.bytecode.object"]}},
}
_DRIVER = (
    "const solc = require(process.argv[1]);"
    "let input = '';"
    "process.stdin.on('data', c => input += c);"
    "process.stdin.on('end', () => process.stdout.write(JSON.stringify("
    "{version: solc.version(), output: JSON.parse(solc.compile(input))})));"
)


@dataclass(frozen=True)
class Compiler:
    node: str
    solc_module: Path


def find_compiler(solc_dir: str | None = None) -> Compiler | None:
    """node and the pinned solcjs, or None when either is missing (the caller says why)."""
    node = shutil.which("node")
    if node is None:
        return None
    candidates = [solc_dir, os.environ.get("COMPUTE_SOLC_DIR"), *DEFAULT_SOLC_DIRS]
    for folder in candidates:
        if not folder:
            continue
        module = Path(os.path.expanduser(folder)) / "node_modules" / "solc"
        package = module / "package.json"
        if package.is_file() and json.loads(package.read_text()).get("version") == SOLC_VERSION:
            return Compiler(node, module)
    return None


def sources() -> dict[str, str]:
    """Every ``.sol`` under contracts/, keyed by its path relative to the repository."""
    found = sorted(CONTRACTS_DIR.rglob("*.sol"))
    if not found:
        raise BuildError(f"no Solidity sources under {CONTRACTS_DIR}")
    return {str(path.relative_to(REPO)): path.read_text() for path in found}


def compile_sources(compiler: Compiler, texts: dict[str, str]) -> dict[str, object]:
    """The artifact for ``texts`` (standard-JSON compile through solcjs)."""
    request = {
        "language": "Solidity",
        "sources": {name: {"content": text} for name, text in texts.items()},
        "settings": SETTINGS,
    }
    try:
        done = subprocess.run(
            [compiler.node, "-e", _DRIVER, str(compiler.solc_module)],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        raise BuildError("solcjs took more than 300 s") from error
    if done.returncode != 0:
        raise BuildError(f"solcjs failed: {done.stderr.strip()[-2000:]}")
    reply = json.loads(done.stdout)
    output = reply["output"]
    errors = [e for e in output.get("errors", []) if e.get("severity") == "error"]
    if errors:
        raise BuildError("; ".join(e.get("formattedMessage", e.get("message", "?")) for e in errors))
    contracts: dict[str, object] = {}
    for source, units in sorted(output["contracts"].items()):
        for name, unit in sorted(units.items()):
            bytecode = unit["evm"]["bytecode"]["object"]
            if not bytecode:
                continue  # interfaces
            contracts[name] = {"source": source, "abi": unit["abi"], "bytecode": "0x" + bytecode}
    return {
        "_generated": "by `python -m compute collateral build` from contracts/; do not edit",
        "compiler": reply["version"],
        "settings": {k: v for k, v in SETTINGS.items() if k != "outputSelection"},
        "sources": {name: hashlib.sha256(text.encode()).hexdigest() for name, text in texts.items()},
        "contracts": contracts,
    }


def render(artifact: dict[str, object]) -> str:
    return json.dumps(artifact, indent=1, sort_keys=True) + "\n"


def build(compiler: Compiler, path: Path = ARTIFACT) -> Path:
    path.write_text(render(compile_sources(compiler, sources())))
    return path


def differences(compiler: Compiler, path: Path = ARTIFACT) -> list[str]:
    """What differs between the committed artifact and a fresh compile (empty: it matches)."""
    fresh = compile_sources(compiler, sources())
    try:
        committed = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        return [f"cannot read {path}: {error}"]
    out = [
        f"{key} differs"
        for key in ("compiler", "settings", "sources")
        if committed.get(key) != fresh.get(key)
    ]
    mine, theirs = committed.get("contracts", {}), fresh["contracts"]
    assert isinstance(theirs, dict)
    for name in sorted(set(mine) | set(theirs)):
        if mine.get(name) != theirs.get(name):
            out.append(f"contract {name} differs (abi or bytecode)")
    return out
