"""The cluster around the replicas: replica pools, P/D disaggregation's KV hand-off and
closed-loop sessions."""
