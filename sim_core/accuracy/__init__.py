"""Accuracy against real servers: read measured benchmark runs, replay them through the
simulator, and compare the latencies figure by figure (`python -m sim_core accuracy`)."""
