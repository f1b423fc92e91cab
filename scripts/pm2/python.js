// The Python interpreter of the project's environment, for the pm2 ecosystem files.
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

module.exports = { projectPython, root };
