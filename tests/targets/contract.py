"""Prints, as JSON, what a script can see of how it was started."""
import json
import os
import sys

print(json.dumps({"argv": sys.argv, "name": __name__, "path0": sys.path[0],
                  "cwd": os.getcwd(), "file": __file__}))
