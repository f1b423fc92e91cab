// The Python interpreter of the project's environment, and the settings file, for the pm2 ecosystem files.
// Order: $COMPUTE_PYTHON (explicit) > $VIRTUAL_ENV (pm2 started from an activated venv) > the
// README's .venv in this checkout. Never a bare `python3`: that is the system's interpreter, which
// has none of the project's packages. Fails loudly, naming the fix, when none exists.
const fs = require("fs");
const path = require("path");

const root = path.resolve(__dirname, "..", "..");

function projectPython() {
  if (process.env.COMPUTE_PYTHON) return process.env.COMPUTE_PYTHON;
  const candidates = [process.env.VIRTUAL_ENV, path.join(root, ".venv")].filter(Boolean);
  for (const venv of candidates) {
    const python = path.join(venv, "bin", "python");
    if (fs.existsSync(python)) return python;
  }
  throw new Error(
    "no Python environment for the compute subnet: create it (python3 -m venv .venv && " +
      ".venv/bin/pip install -e .), activate it before `pm2 start`, or set COMPUTE_PYTHON",
  );
}

// The neuron's settings file: $COMPUTE_ENV_FILE when set (it must exist), else .env in this
// checkout (the neuron's own default, read from its cwd). No file: the neuron runs on the
// environment and its defaults (wallet 'default'), which this says at `pm2 start`.
function envFileArgs() {
  const file = process.env.COMPUTE_ENV_FILE;
  if (file) {
    if (!fs.existsSync(file)) throw new Error(`COMPUTE_ENV_FILE=${file}: no such file`);
    if (/\s/.test(file)) throw new Error(`COMPUTE_ENV_FILE=${file}: a path without spaces, please`);
    return ["--env_file", path.resolve(file)];
  }
  if (!fs.existsSync(path.join(root, ".env"))) {
    console.warn(
      `no ${path.join(root, ".env")}: the neuron reads the environment and its defaults only ` +
        "(wallet 'default'); cp .env.example .env and set BT_WALLET, BT_WALLET_HOTKEY...",
    );
  }
  return [];
}

module.exports = { envFileArgs, projectPython, root };
