# Sourced by the scripts that need the Python package: makes .venv (Python 3.11) with maturin and
# numpy plus any extra packages given as arguments, and (re)builds the package into it when the
# sources changed since the last build. The first build takes a few minutes (a release build).
python_env() {
    if [ ! -x .venv/bin/python ]; then
        python3 -m venv .venv
        .venv/bin/pip install --quiet --upgrade pip
    fi
    .venv/bin/pip install --quiet "maturin>=1.9.4" numpy "$@"
    local stamp=.venv/.stampede-built
    if [ ! -e "$stamp" ] || [ -n "$(find crates python Cargo.toml Cargo.lock -newer "$stamp" -not -path '*/__pycache__*' -print -quit)" ]; then
        echo "== Building the stampede Python package into .venv (release build; minutes the first time)" >&2
        # Stamped only once installed: a failed build is retried next time, whoever sources this.
        .venv/bin/pip install --quiet ./python && touch "$stamp"
    fi
}
