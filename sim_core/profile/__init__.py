"""`python -m sim_core.profile`: measure a model's operators on this machine's GPU with PyTorch
and write Vidur-format CSVs (`compute/<device>/sim_core/<model>/{mlp,attention}.csv`) that the
learned predictor trains on. PyTorch is optional: it is imported only when measuring."""
