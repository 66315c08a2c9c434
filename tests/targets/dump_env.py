"""Writes what a rank sees (torchrun's variables, argv, __name__) to argv[1].rank<RANK>.json."""

import json
import os
import sys

names = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
         "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT",
         "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
         "TORCHELASTIC_USE_AGENT_STORE", "OMP_NUM_THREADS")
seen = {"env": {name: os.environ.get(name) for name in names}, "argv": sys.argv,
        "name": __name__}
with open(f"{sys.argv[1]}.rank{os.environ['RANK']}.json", "w") as out:
    json.dump(seen, out)
