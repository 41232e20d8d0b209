# Sourced by scripts/demo and scripts/test: installs everything the project needs, idempotently.
#   .tools/  a small venv that holds the pinned uv
#   .venv/   the project environment, synced from uv.lock (all extras + dev tools)
#   tests/services/node_modules/  the offline test services, from package-lock.json (only with --services)
#   chromium + chromedriver      Debian packages for the browser test (only with --services; needs root)
#   bubblewrap                   Debian package for the DeepAgent sandbox tests (only with --services; needs root)
#   postgresql + pgvector, qemu-user  Debian packages/source for the test Postgres (only with --services; needs root)
set -euo pipefail
UV_VERSION="0.13.9"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

if [ ! -x .tools/bin/uv ] || [ "$(.tools/bin/uv --version | awk '{print $2}')" != "$UV_VERSION" ]; then
    echo "==> installing uv $UV_VERSION into .tools/" >&2
    python3 -m venv .tools
    .tools/bin/python -m pip install --quiet --disable-pip-version-check "uv==$UV_VERSION"
fi
export UV_PROJECT_ENVIRONMENT="$root/.venv"
export UV_PYTHON_DOWNLOADS=never
echo "==> syncing .venv from uv.lock" >&2
# --locked: the project's own dependencies are exactly uv.lock's; --inexact: packages you added to .venv
# yourself (`.venv/bin/pip install jupyterlab`) are kept, not removed on every run.
.tools/bin/uv sync --quiet --locked --inexact --all-extras --python python3

if [ "${1:-}" = "--services" ]; then
    if ! command -v npm >/dev/null 2>&1; then
        echo "npm is missing: install Node.js 20 + npm (apt-get install nodejs npm) to run the test services." >&2
        exit 1
    fi
    if [ ! -f tests/services/node_modules/.package-lock.json ] \
        || ! cmp -s tests/services/package-lock.json tests/services/node_modules/.ai-utils-lock; then
        echo "==> npm ci in tests/services" >&2
        (cd tests/services && npm ci --no-audit --no-fund --loglevel=error)
        cp tests/services/package-lock.json tests/services/node_modules/.ai-utils-lock
    fi
    # The examples' web page is checked in a real headless browser (tests/test_fastapi_example.py).
    if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
        echo "==> apt-get install chromium chromium-driver" >&2
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
    fi
    # The DeepAgent's isolated sandbox runs commands in bubblewrap (tests/deep/test_sandbox.py).
    if ! command -v bwrap >/dev/null 2>&1; then
        echo "==> apt-get install bubblewrap" >&2
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null
    fi
    # The tests' Postgres + pgvector, built to run on any x86-64 CPU (tests/services/README.md says why and how).
    bash tests/services/install_postgres.sh
    # tests/test_services.py runs pgvector under emulated older CPUs to show it needs no AVX / AVX-512.
    if ! command -v qemu-x86_64 >/dev/null 2>&1; then
        echo "==> apt-get install qemu-user" >&2
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-user >/dev/null
    fi
fi
