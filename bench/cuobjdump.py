"""The SASS of a cubin through cuobjdump (offline, no GPU): the one wrapper that bench/sass.py, bench/sass_diff.py
and bench/restamp.py use. CUOBJDUMP or PATH names the tool (``pip install nvidia-cuda-cuobjdump
nvidia-cuda-nvdisasm`` provides both, with nvdisasm's folder on PATH). No cumm import: sass_diff and restamp run it
under another revision's tree."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile


def sass(cubin: bytes, mask: str | None = None) -> str:
    """cuobjdump -sass of ``cubin``; ``mask``: a kernel name replaced by "KERNEL" (a name spells its
    configuration, so variants compare by their code alone)."""
    exe = os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump")
    if exe is None:
        raise SystemExit("cuobjdump not found: set CUOBJDUMP or put it on PATH")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        text = subprocess.run([exe, "-sass", f.name], capture_output=True, text=True, check=True).stdout
    return text if mask is None else text.replace(mask, "KERNEL")
