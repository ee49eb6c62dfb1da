# The environment every bench/sessionN.sh step runs in on the device machine (sourced, not run): the package
# and bench/ importable, unbuffered logs, compile caches in /tmp, logs under $OUT; `here` is the scripts' folder.
export PYTHONPATH=.:bench PYTHONUNBUFFERED=1 CUPY_CACHE_DIR=/tmp/cupy-cache CUMM_CACHE_DIR=/tmp/cumm-cache
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
here=$(dirname "$0")
