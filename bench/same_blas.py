"""Gives a benchmark's plain-PyTorch side the OpenBLAS kernels TowerPS's processes run.

On a CPU that Debian's OpenBLAS takes for an older one, TowerPS's programs start again with the
right kernels (kernels/cpu/blas_kernels.h) and a PyTorch script would keep the library's choice,
so a comparison would time the kernels, not the two programs. ``use_towerps_kernels(binary)``
asks ``towerps-bench blas --json`` (``binary``) and sets OPENBLAS_CORETYPE in this process's
environment, which every process it starts inherits (a user's own value is kept). Call it before
anything loads OpenBLAS (``import torch``, ``import numpy``)."""

import json
import os
import shutil
import subprocess


def towerps_bench(launch):
    """The towerps-bench next to the towerps-launch `launch` (a path, or a name on PATH)."""
    found = shutil.which(launch) or launch
    return os.path.join(os.path.dirname(os.path.abspath(found)), "towerps-bench")


def use_towerps_kernels(binary):
    """Returns the kernels both sides run, e.g. "SkylakeX (chosen by TowerPS ...)"."""
    try:
        out = subprocess.run([binary, "blas", "--json"], stdout=subprocess.PIPE, text=True,
                             timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise SystemExit("%s blas --json failed (%s): build it (scripts/build.sh release) or "
                         "give its path" % (binary, e))
    report = json.loads(out)
    if report["coretype"] and "OPENBLAS_CORETYPE" not in os.environ:
        os.environ["OPENBLAS_CORETYPE"] = report["coretype"]
    return "%s kernels on this %s CPU, chosen by %s" % (report["running"], report["cpu"],
                                                         report["chosen_by"])
