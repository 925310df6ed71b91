#!/usr/bin/env bash
# Bounded fuzzing of warren's parsers with cargo-fuzz (libFuzzer): the zonecfg parser,
# the name validator and state-file loading. Default: 20 s per target (about a minute).
# Longer runs: scripts/fuzz.sh 3600   (seconds per target); corpora stay in fuzz/corpus/.
# cargo-fuzz needs nightly compiler features; RUSTC_BOOTSTRAP=1 enables them on the
# stable toolchain this machine has.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d "$HOME/.cargo/bin" ] && export PATH="$HOME/.cargo/bin:$PATH"
secs="${1:-20}"
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "scripts/fuzz.sh: installing cargo-fuzz (cargo install)"
    cargo install cargo-fuzz --locked --quiet
fi
export RUSTC_BOOTSTRAP=1
cd fuzz
for target in config_parse name_validate state_load; do
    echo "fuzz: $target for ${secs}s"
    mkdir -p "corpus/$target"
    cargo fuzz run "$target" "corpus/$target" -- -max_total_time="$secs" -max_len=4096 2>&1 |
        grep -E "^(#[0-9]+.*DONE|Done|==[0-9]+==|SUMMARY|thread .* panicked)|ERROR" || true
    # cargo fuzz exits non-zero on a crash; the pipe above hides it, so check artifacts.
    if compgen -G "artifacts/$target/crash-*" >/dev/null; then
        echo "fuzz: $target found a crash: fuzz/artifacts/$target/" >&2
        exit 1
    fi
done
