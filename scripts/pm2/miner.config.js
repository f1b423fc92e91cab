// pm2 start scripts/pm2/miner.config.js   (edit the args: wallet, external ip, backend)
// Leases live in --miner.data_dir and in their containers: pm2 restarts (kill -9 included) are safe,
// the miner adopts running leases on start. Secrets (WANDB_API_KEY) go in .env, not here.
// Open files: run `ulimit -n 65536` before `pm2 start` (pm2 passes its own limit on; the miner
// raises its soft limit to the hard one at start and logs it). See docs/miner.md "Open files".
// The interpreter is the project's environment (scripts/pm2/python.js): $COMPUTE_PYTHON, else the
// activated venv, else .venv in this checkout; never the system's bare python3.
const { projectPython, root } = require("./python.js");

module.exports = {
  apps: [
    {
      name: "compute-miner",
      script: "neurons/miner.py",
      interpreter: projectPython(),
      cwd: root,
      args: [
        "--netuid", "27",
        "--subtensor.network", "finney",
        "--wallet.name", "miner",
        "--wallet.hotkey", "default",
        "--axon.port", "8091",
        "--axon.external_ip", "203.0.113.10",
        "--miner.backend", "docker",
        "--miner.ssh_port_range", "40000-40999",
        "--miner.data_dir", "~/.compute/miner",
        "--logging.logging_dir", "~/.compute/miner/logs",
      ].join(" "),
      autorestart: true,
      max_restarts: 50,
      restart_delay: 10000,
      kill_timeout: 30000,
      env: { PYTHONUNBUFFERED: "1" },
    },
  ],
};
