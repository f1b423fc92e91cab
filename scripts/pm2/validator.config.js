// pm2 start scripts/pm2/validator.config.js   (nothing to edit here: a tracked file, `git pull` would conflict)
// Settings come from the environment and from .env in this checkout (git-ignored): cp .env.example
// .env, then set BT_WALLET, BT_WALLET_HOTKEY (and WANDB_API_KEY, COMPUTE_VALIDATOR_*...). Every
// flag --a.b_c is COMPUTE_A_B_C; the defaults: finney, netuid 27, ~/.compute/validator.
// Another file: COMPUTE_ENV_FILE=/path/to/validator.env pm2 start scripts/pm2/validator.config.js
// Logs: pm2 logs compute-validator; INFO lines land in pm2's out log, warnings and errors in its error log.
// The validator keeps all state in --validator.data_dir; pm2 restarts are safe (kill -9 included).
// The interpreter is the project's environment (scripts/pm2/python.js): $COMPUTE_PYTHON, else the
// activated venv, else .venv in this checkout; never the system's bare python3.
const { envFileArgs, projectPython, root } = require("./python.js");

module.exports = {
  apps: [
    {
      name: "compute-validator",
      script: "neurons/validator.py",
      interpreter: projectPython(),
      cwd: root,
      args: envFileArgs().join(" "),
      autorestart: true,
      max_restarts: 50,
      restart_delay: 10000,
      kill_timeout: 30000,
      env: { PYTHONUNBUFFERED: "1" },
    },
  ],
};
