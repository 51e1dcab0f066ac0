"""The run: event kernel, the three-tier simulator (router -> replica schedulers -> stages), CPU/GPU
overlap, decode fast-forward, the run budget and `run_simulation`, the core's one entry point."""
