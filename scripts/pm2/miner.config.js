// pm2 start scripts/pm2/miner.config.js   (nothing to edit here: a tracked file, `git pull` would conflict)
// Settings come from the environment and from .env in this checkout (git-ignored): cp .env.example
// .env, then set BT_WALLET, BT_WALLET_HOTKEY, COMPUTE_AXON_EXTERNAL_IP (behind NAT also
// COMPUTE_AXON_EXTERNAL_PORT), COMPUTE_MINER_BACKEND... Every flag --a.b_c is COMPUTE_A_B_C; the
// defaults: finney, netuid 27, port 8091, docker backend, SSH ports 40000-40999, ~/.compute/miner.
// Another file: COMPUTE_ENV_FILE=/path/to/miner.env pm2 start scripts/pm2/miner.config.js
// Logs: pm2 logs compute-miner; INFO lines land in pm2's out log, warnings and errors in its error log.
// Leases live in --miner.data_dir and in their containers: pm2 restarts (kill -9 included) are safe,
// the miner adopts running leases on start. Secrets (WANDB_API_KEY) go in .env too.
// Open files: run `ulimit -n 65536` before `pm2 start` (pm2 passes its own limit on; the miner
// raises its soft limit to the hard one at start and logs it). See docs/miner.md "Open files".
// The interpreter is the project's environment (scripts/pm2/python.js): $COMPUTE_PYTHON, else the
// activated venv, else .venv in this checkout; never the system's bare python3.
const { envFileArgs, projectPython, root } = require("./python.js");

module.exports = {
  apps: [
    {
      name: "compute-miner",
      script: "neurons/miner.py",
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
