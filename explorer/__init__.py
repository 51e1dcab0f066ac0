"""The app's shared parts: scenario state, widget binding, uploads, server settings and safety; the page
scripts in `pages/` and `app.py` are built from these."""
