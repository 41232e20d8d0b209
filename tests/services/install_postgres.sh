#!/usr/bin/env bash
# Installs the tests' Postgres + pgvector so that it runs on any x86-64 CPU (why this way: README.md here).
# Called by scripts/_bootstrap.sh --services; returns at once when a portable build is already in place.
#   - Debian's postgresql-NN server (NN = the version the `postgresql` package of this Debian release picks);
#   - Debian's binary postgresql-NN-pgvector when the release has one (trixie and later), else pgvector built
#     from Debian's own source package (its no-native patch, and OPTFLAGS="" on top: baseline x86-64 code;
#     pgvector's fast paths stay, chosen at run time from cpuid).
set -euo pipefail
PGVECTOR_SOURCE_SUITE="trixie"
STAMP_NAME="vector.ai-utils-portable"

# Prints the newest major version that has a server and a portable pgvector; fails when there is none.
installed_major() {
    local bin n
    for bin in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5 -rn); do
        n="$(basename "$(dirname "$bin")")"
        [ -x "$bin/postgres" ] && [ -x "$bin/initdb" ] && [ -f "/usr/lib/postgresql/$n/lib/vector.so" ] \
            && [ -f "/usr/share/postgresql/$n/extension/vector.control" ] || continue
        # Our build's stamp holds the sha256 of the vector.so it installed: a vector.so put there since is rebuilt.
        if grep -qs "sha256 $(sha256sum "/usr/lib/postgresql/$n/lib/vector.so" | cut -d' ' -f1)\$" \
            "/usr/share/postgresql/$n/extension/$STAMP_NAME" \
            || dpkg-query -W -f='${Status}' "postgresql-$n-pgvector" 2>/dev/null | grep -q "install ok installed"; then
            echo "$n"
            return 0
        fi
    done
    return 1
}

if installed_major >/dev/null; then
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "Postgres + pgvector for the tests are missing and installing them needs root (apt-get):" \
        "run scripts/_bootstrap.sh --services as root once (see tests/services/README.md)." >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
major="$(apt-cache depends postgresql 2>/dev/null | sed -n 's/^ *Depends: postgresql-\([0-9][0-9]*\)$/\1/p' | head -n 1)"
if [ -z "$major" ]; then
    echo "apt offers no Debian 'postgresql' package here: cannot install the tests' Postgres." >&2
    exit 1
fi
if apt-cache policy "postgresql-$major-pgvector" 2>/dev/null | grep -q 'Candidate: [0-9]'; then
    echo "==> apt-get install postgresql-$major postgresql-$major-pgvector" >&2
    apt-get install -y -qq --no-install-recommends "postgresql-$major" "postgresql-$major-pgvector" >/dev/null
else
    echo "==> apt-get install postgresql-$major postgresql-server-dev-$major; pgvector from Debian's source" \
        "package ($PGVECTOR_SOURCE_SUITE)" >&2
    apt-get install -y -qq --no-install-recommends "postgresql-$major" "postgresql-server-dev-$major" \
        make gcc dpkg-dev >/dev/null
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    # The mirror this machine's apt already uses; a private source list leaves the system's apt config alone.
    . /etc/os-release
    site="$(apt-get indextargets --format '$(SITE) $(CODENAME)' 'Identifier: Packages' \
        | awk -v c="$VERSION_CODENAME" '$2 == c {print $1; exit}')"
    if [ -z "$site" ]; then
        echo "found no Debian archive for '$VERSION_CODENAME' in apt's sources: cannot fetch pgvector's source." >&2
        exit 1
    fi
    mkdir -p "$work/lists/partial"
    echo "deb-src $site $PGVECTOR_SOURCE_SUITE main" >"$work/sources.list"
    # _apt cannot write into a root-only temp dir; apt still checks every file against the signed index.
    apt_private=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
        -o "Dir::State::Lists=$work/lists" -o APT::Sandbox::User=root)
    quiet() {  # the step's output only when it fails (dpkg-source warns that it cannot check the uploader's key)
        "$@" >"$work/step.log" 2>&1 || { cat "$work/step.log" >&2; echo "failed: $*" >&2; exit 1; }
    }
    quiet apt-get "${apt_private[@]}" update
    cd "$work"
    quiet apt-get "${apt_private[@]}" source --download-only pgvector
    quiet dpkg-source -x pgvector_*.dsc src
    quiet make -C src OPTFLAGS="" with_llvm=no PG_CONFIG="/usr/lib/postgresql/$major/bin/pg_config"
    quiet make -C src OPTFLAGS="" with_llvm=no PG_CONFIG="/usr/lib/postgresql/$major/bin/pg_config" install
    echo "pgvector $(dpkg-parsechangelog -l src/debian/changelog -S Version) built with OPTFLAGS=\"\"," \
        "sha256 $(sha256sum "/usr/lib/postgresql/$major/lib/vector.so" | cut -d' ' -f1)" \
        >"/usr/share/postgresql/$major/extension/$STAMP_NAME"
    cd - >/dev/null
fi
installed_major >/dev/null || {
    echo "installed Postgres $major + pgvector, but the tests still cannot find them under /usr/lib/postgresql." >&2
    exit 1
}
