# Sourced by the scripts that need the Python package: makes .venv (Python 3.11) with maturin and
# numpy plus any extra packages given as arguments, and (re)builds the package into it when the
# sources changed since the last build, or it was built with another profile.
#
# STAMPEDE_PY_PROFILE is the cargo profile: `release` (the default: applications and benchmarks;
# the first build takes a few minutes) or `dev` (what ./scripts/test.sh uses: it shares the debug
# build of the Rust tests, so the suite compiles every dependency once, and runs the binding with
# its debug assertions on). `stampede.BUILD_PROFILE` says which one is installed.
python_env() {
    local profile="${STAMPEDE_PY_PROFILE:-release}"
    # A venv whose making was interrupted (Ctrl-C during its first run) has python but no pip:
    # it is made again.
    if [ ! -x .venv/bin/pip ]; then
        python3 -m venv --clear .venv
        .venv/bin/pip install --quiet --upgrade pip
    fi
    .venv/bin/pip install --quiet "maturin>=1.9.4" numpy "$@"
    local stamp=.venv/.stampede-built
    if [ ! -e "$stamp" ] || [ "$(cat "$stamp")" != "$profile" ] \
        || [ -n "$(find crates python Cargo.toml Cargo.lock -newer "$stamp" -not -path '*/__pycache__*' -print -quit)" ]; then
        echo "== Building the stampede Python package into .venv ($profile build; minutes the first time)" >&2
        # Stamped only once installed: a failed build is retried next time, whoever sources this.
        MATURIN_PEP517_ARGS="--profile $profile" .venv/bin/pip install --quiet ./python && echo "$profile" >"$stamp"
    fi
}
