"""The C part of Onyx: yfilter's native per-message runtime (yfilter/csrc/).

Everything else is declared in pyproject.toml; this file only adds the extension,
which reads the libxml2 trees lxml builds, with the libxml2 headers lxml ships.
"""

import lxml
from setuptools import Extension, setup

setup(ext_modules=[Extension(
    "yfilter._matcher",
    sources=[f"yfilter/csrc/{name}.c" for name in ("matcher", "doc", "tables", "number")],
    include_dirs=lxml.get_include(),
    extra_compile_args=["-O2", "-std=gnu11", "-Wall", "-Wextra", "-Wno-unused-parameter",
                        "-Wno-missing-field-initializers", "-Wno-cast-function-type"],
)])
