"""The one thing pyproject.toml cannot say: pa.region's enter and exit in C
(src/profile_all/_region_fast.c). It is optional: where it does not build (no compiler),
the install goes on and regions.py's pure-Python path is used; meta.json says which."""

import sys

from setuptools import Extension, setup

setup(ext_modules=[] if sys.platform != "linux" else [
    Extension("profile_all._region_fast", ["src/profile_all/_region_fast.c"], optional=True,
              extra_compile_args=["-O2", "-std=c11"]),
])
