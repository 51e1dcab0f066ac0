import sys

from sim_core.cli.main import main

sys.exit(main())
