#!/usr/bin/env bash
# warren's main job on the embedded defaults: build, then clone, boot, measure, halt and
# remove N zones (default 100) made from the host's own /usr. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -d "$HOME/.cargo/bin" ] && export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release --quiet
exec ./target/x86_64-unknown-linux-gnu/release/warren demo "$@"
