"""`pip install .`: builds the extension mosaic._mosaic with CMake (the target
mosaic_python_ext of src/python) and packages it with the pure-Python part, python/mosaic.

Offline on Debian 12 (no PyPI; pip's build isolation would try to download setuptools):

    python3 -m venv --system-site-packages .venv       # sees Debian's numpy
    .venv/bin/pip install --no-build-isolation .

Environment:
  MOSAIC_BUILD_DIR    an existing CMake build folder to build the module in, as configured
                      (e.g. build/); default: a Release build of its own in build-pip/cmake
  MOSAIC_CMAKE_ARGS   extra configure options for the default build, e.g. "-DMOSAIC_CUDA=OFF"
"""

import glob
import os
import re
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
# setuptools' own folder (its default, build/, is the CMake build folder of scripts/build.sh):
# inside MOSAIC_BUILD_DIR when given, so builds from different folders never share it.
BUILD_BASE = os.path.join(os.path.abspath(os.environ["MOSAIC_BUILD_DIR"]), "pip") \
    if os.environ.get("MOSAIC_BUILD_DIR") else os.path.join(ROOT, "build-pip")


def project_version():
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        return re.search(r"project\(mosaic VERSION ([0-9.]+)", f.read()).group(1)


class CMakeBuild(build_ext):
    """Builds each extension as a CMake target instead of compiling its (empty) sources."""

    def build_extension(self, ext):
        build_dir = os.environ.get("MOSAIC_BUILD_DIR")
        if build_dir:
            build_dir = os.path.abspath(build_dir)
            if not os.path.isfile(os.path.join(build_dir, "CMakeCache.txt")):
                sys.exit(f"MOSAIC_BUILD_DIR={build_dir} is not a configured CMake build folder")
        else:
            build_dir = os.path.join(BUILD_BASE, "cmake")
            self.configure(build_dir)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "mosaic_python_ext", "--parallel", jobs])
        built = glob.glob(os.path.join(build_dir, "python", "mosaic", "_mosaic*.so"))
        if not built:
            sys.exit(f"{build_dir}: no python/mosaic/_mosaic*.so after building mosaic_python_ext")
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(built[0], target)

    @staticmethod
    def configure(build_dir):
        args = ["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
                "-DMOSAIC_BUILD_TESTS=OFF", "-DMOSAIC_BUILD_BENCH=OFF", "-DMOSAIC_PYTHON=ON",
                f"-DPython3_EXECUTABLE={sys.executable}"]
        if shutil.which("ninja"):
            args += ["-G", "Ninja"]
        if shutil.which("ccache"):
            args += ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
        args += shlex.split(os.environ.get("MOSAIC_CMAKE_ARGS", ""))
        subprocess.check_call(args)


os.makedirs(BUILD_BASE, exist_ok=True)  # egg_info writes there, not into python/
setup(
    name="mosaic",
    version=project_version(),
    description="Memory-planned inference for masked diffusion language models (LLaDA, Dream)",
    python_requires=">=3.9",
    install_requires=["numpy"],
    package_dir={"": "python"},
    packages=["mosaic"],
    ext_modules=[Extension("mosaic._mosaic", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": BUILD_BASE}, "egg_info": {"egg_base": BUILD_BASE}},
    zip_safe=False,
)
