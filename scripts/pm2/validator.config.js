// pm2 start scripts/pm2/validator.config.js   (edit the args: wallet, network, netuid)
// The validator keeps all state in --validator.data_dir; pm2 restarts are safe (kill -9 included).
// The interpreter is the project's environment (scripts/pm2/python.js): $COMPUTE_PYTHON, else the
// activated venv, else .venv in this checkout; never the system's bare python3.
const { projectPython, root } = require("./python.js");

module.exports = {
  apps: [
    {
      name: "compute-validator",
      script: "neurons/validator.py",
      interpreter: projectPython(),
      cwd: root,
      args: [
        "--netuid", "27",
        "--subtensor.network", "finney",
        "--wallet.name", "validator",
        "--wallet.hotkey", "default",
        "--validator.data_dir", "~/.compute/validator",
        "--logging.logging_dir", "~/.compute/validator/logs",
      ].join(" "),
      autorestart: true,
      max_restarts: 50,
      restart_delay: 10000,
      kill_timeout: 30000,
      env: { PYTHONUNBUFFERED: "1" },
    },
  ],
};
