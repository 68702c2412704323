#!/usr/bin/env bash
# Runs the official NATS clients' own authentication and transport (TLS, WebSocket) tests
# against a server binary, each suite starting the server exactly as that client's test harness
# starts `nats-server`:
#
#   py      nats.py, package `nats` (nats/tests): nkeys, JWT/creds, user/pass, token,
#           no_auth_user. Its harness (tests/utils.py, NATSD.start) runs a file named
#           `nats-server` found in the current directory with -p -m -a --user/--pass/--auth -c.
#   pycore  nats.py's newer `nats-core` client (needs Python >= 3.13); its harness (the
#           `nats-server` Python package of the same repository) runs `nats-server` from PATH
#           with --addr --port --config and reads the server's log on stderr.
#   rs      async-nats from nats.rs: nkey_tests, jwt_tests and the auth tests of client_tests.
#           Its harness (the `nats-server` crate, nats-server/src/lib.rs) runs `nats-server`
#           from PATH with --store_dir -p -1 -l LOG -P PID -c CFG and greps the log file.
#   pytls   nats.py's TLS tests (test_client.py: ClientTLSTest, ClientTLSHandshakeFirstTest,
#           ClientTLSReconnectTest) and WebSocket tests (test_client_websocket.py, with aiohttp),
#           run from the repository's root as its CI does: the configs they pass
#           (nats/tests/conf/tls_handshake_first.conf, ws_tls.conf) name their certificates
#           relative to it. The harness finds the server as nats/tests/nats-server there;
#           NATS_SERVER_VERSION is v2.14.0 unless set (the handshake-first tests need it).
#   rstls   async-nats's tls_tests and websocket_test (and client_tests'
#           client::connect_invalid_tls_over_ip), with the harness of `rs`, from
#           async-nats/ (tests/configs/tls*.conf, ws*.conf name tests/configs/certs/...).
#           tls_tests' custom_tls_client and tls_with_native_certs dial demo.nats.io: they fail
#           without Internet access whatever the server.
#   rsjs    async-nats's JetStream suites: the jetstream_tests, kv_tests and object_store test
#           binaries, with the harness of `rs` (it adds --jetstream / -js from the test configs
#           and --store_dir). jetstream::create_stream_with_replicas starts a 3-node cluster
#           and only runs with --unsupported.
#   pyjs    nats.py's legacy JetStream tests (nats/tests/test_js.py: streams, pull and push
#           consumers, KV, object store, account limits) with the harness of `py` (-js -sd=DIR,
#           ports 4222/8222; AccountLimitsTest adds -c nats/tests/conf/js-limits.conf), run
#           from the repository's root like `pytls` (the object-store tests upload files there).
#   pyjsnew the tests of nats.py's newer `nats-jetstream` and `nats-key-value` packages (need
#           Python >= 3.13, as `pycore`), with the harness of `pycore` (--jetstream --store_dir,
#           random ports). Their test names get the package's directory as a prefix.
#
# A MANUAL TOOL, NOT RUN BY CI: it needs the client repositories' sources (CI has no copy of
# them and cannot reach where they are hosted), PyPI (pytest, pytest-asyncio, nkeys and the
# clients' build backends, aiohttp) and crates.io (async-nats's dependencies). The nats.py tests
# use fixed ports (4222-4225, 4555, 8222-8225, 6223-6225, 8080-8081), async-nats's transport
# tests 4222, 4443, 4545, 9090 and 8444-8445: nothing else may listen there.
#
# Usage: tests/official/run-official-suites.sh [options] SERVER
#   SERVER           the binary to test: a path; `rnats` (builds this checkout with
#                    `cargo build -p rnats` and uses $CARGO_TARGET_DIR/debug/rnats);
#                    `rnats-release` (the same with --release); or `reference` (the Go
#                    nats-server 2.14.0 from tools/reference-server)
#   --clients DIR    where the client sources are: DIR/nats.py and DIR/nats.rs (or the
#                    mirror layout DIR/nats-io+nats.py/repo, DIR/nats-io+nats.rs/repo), each
#                    a work tree or a git directory (exported with `git archive HEAD`).
#                    Default: /work/.mirror (the read-only mirrors of the dev machines)
#   --work DIR       scratch directory: exported trees, venvs, logs (default
#                    ${TMPDIR:-/tmp}/rnats-official-suites). async-nats builds in
#                    $CARGO_TARGET_DIR/official-natsrs if CARGO_TARGET_DIR is set, else DIR/target.
#                    Two runs at once need two DIRs: the `nats-server` wrapper every harness
#                    finds lives there, and the second run would point the first one's at its
#                    own server
#   --suites LIST    comma-separated subset of py,pycore,rs,pytls,rstls,rsjs,pyjs,pyjsnew
#                    (default: all eight)
#   --unsupported    also run the tests that need clustering (nats.py's
#                    ClusterDiscoveryReconnectTest, async-nats's
#                    jetstream::create_stream_with_replicas): rnats refuses
#                    --cluster_listen/--routes/--cluster today, so they fail there
#   --reactor NAME   pass `--reactor NAME` (uring or mio) to every server started: rnats only;
#                    the default label gets `-NAME` appended
#   --label NAME     name of this run's result directory under WORK/logs (default: the
#                    server's file name, `reference` or `rnats`)
#
# Results: WORK/logs/LABEL/<suite>.log (full output) and <suite>.results (one `PASS name` /
# `FAIL name` / `SKIP name` line per test, sorted; a cargo test still running when its
# binary's time runs out counts as FAIL), so two runs can be compared with
#   diff WORK/logs/reference/py.results WORK/logs/rnats/py.results
# Exit status: 0 when every selected test passed (or was skipped by the suite itself).
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
clients=/work/.mirror
work=${TMPDIR:-/tmp}/rnats-official-suites
suites=py,pycore,rs,pytls,rstls,rsjs,pyjs,pyjsnew
unsupported=0
reactor=
label=
server=

die() { echo "run-official-suites: $*" >&2; exit 2; }

while [[ $# -gt 0 ]]; do
  case $1 in
    --clients) clients=${2:?}; shift 2 ;;
    --work) work=${2:?}; shift 2 ;;
    --suites) suites=${2:?}; shift 2 ;;
    --unsupported) unsupported=1; shift ;;
    --reactor) reactor=${2:?}; shift 2 ;;
    --label) label=${2:?}; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --) shift; server=${1:-}; break ;;
    -*) die "unknown option $1" ;;
    *) server=$1; shift ;;
  esac
done
[[ -n $server ]] || die "no SERVER given (a path, 'rnats' or 'reference'); see --help"

case $server in
  reference)
    [[ -z $reactor ]] || die "--reactor is for rnats"
    label=${label:-reference}
    server=$("$repo/tools/reference-server")
    ;;
  rnats)
    label=${label:-rnats${reactor:+-$reactor}}
    (cd "$repo" && cargo build -p rnats)
    server=${CARGO_TARGET_DIR:-$repo/target}/debug/rnats
    ;;
  rnats-release)
    label=${label:-rnats-release${reactor:+-$reactor}}
    (cd "$repo" && cargo build --release -p rnats)
    server=${CARGO_TARGET_DIR:-$repo/target}/release/rnats
    ;;
esac
[[ -x $server ]] || die "server binary $server is not executable"
server=$(cd "$(dirname "$server")" && pwd)/$(basename "$server")
label=${label:-$(basename "$server")${reactor:+-$reactor}}
echo "server under test: $server (label $label)"

mkdir -p "$work"
work=$(cd "$work" && pwd)
logs=$work/logs/$label
mkdir -p "$logs" "$work/bin" "$work/run-py"

# The wrapper every harness finds: on PATH for pycore and rs, in the current directory for py.
printf '#!/bin/sh\nexec %q %s"$@"\n' "$server" "${reactor:+--reactor $reactor }" > "$work/bin/nats-server"
chmod +x "$work/bin/nats-server"
cp "$work/bin/nats-server" "$work/run-py/nats-server"

# Copies client NAME (nats.py or nats.rs) into WORK/src/NAME, fresh on every run.
export_client() {
  local name=$1 src dest=$work/src/$1
  for src in "$clients/$name" "$clients/nats-io+$name/repo"; do
    [[ -d $src ]] || continue
    rm -rf "$dest"
    mkdir -p "$dest"
    if [[ $(git -C "$src" rev-parse --is-bare-repository 2>/dev/null) == true ]]; then
      git -C "$src" archive HEAD | tar -x -C "$dest"
    else
      tar -C "$src" --exclude=.git -cf - . | tar -x -C "$dest"
    fi
    if [[ $name == nats.py && -d $dest/nats/tests ]] || [[ $name == nats.rs && -d $dest/async-nats ]]; then
      echo "exported $name from $src"
      return 0
    fi
  done
  die "no $name sources under $clients"
}

ports_free() { # [EXTRA PORTS...]
  local p busy=
  for p in 4222 4223 4224 4225 4555 8222 8223 8224 8225 6223 6224 6225 "$@"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then busy="$busy $p"; fi
  done
  [[ -z $busy ]] || die "ports in use:$busy (the nats.py tests need them free)"
}

# Writes LOG's per-test outcome lines (pytest -v or cargo test output) to RESULTS, sorted.
results_of() {
  local log=$1 out=$2
  {
    sed -nE 's/^(\S+::\S+) (PASSED|FAILED|ERROR|SKIPPED).*/\2 \1/p' "$log"
    sed -nE 's/^test (\S+) \.\.\. (ok|FAILED|ignored)$/\2 \1/p' "$log"
    sed -nE 's/^test (\S+) has been running for over 60 seconds$/HANG \1/p' "$log"
  } | sed -E 's/^(PASSED|ok) /PASS /; s/^(FAILED|ERROR) /FAIL /; s/^(SKIPPED|ignored) /SKIP /' \
    | sed -E 's#^(\S+) \S*/(nats/tests/)#\1 \2#' \
    | awk '$1 == "HANG" { if (!($2 in seen)) hung[$2] = 1; next }
           { seen[$2] = 1; delete hung[$2]; print }
           END { for (t in hung) print "FAIL " t }' \
    | sort -u -k2 > "$out"
}

# Where async-nats and its tests build (rs and rstls share it).
natsrs_target=${CARGO_TARGET_DIR:+$CARGO_TARGET_DIR/official-natsrs}
natsrs_target=${natsrs_target:-$work/target}

status=0
summary=()
record() { # SUITE: turns the log into results, adds a summary line
  local suite=$1 pass fail skip
  results_of "$logs/$suite.log" "$logs/$suite.results"
  pass=$(grep -c '^PASS ' "$logs/$suite.results" || true)
  fail=$(grep -c '^FAIL ' "$logs/$suite.results" || true)
  skip=$(grep -c '^SKIP ' "$logs/$suite.results" || true)
  if [[ $fail -gt 0 || $pass -eq 0 ]]; then status=1; fi
  summary+=("$suite: $pass passed, $fail failed, $skip skipped ($logs/$suite.results)")
}

venv() { # DIR PYTHON "REGISTRY PACKAGES" "LOCAL TREES": a venv with both installed
  local dir=$1 python=$2 deps=$3 trees=$4
  [[ -x $dir/bin/python ]] || "$python" -m venv "$dir"
  # shellcheck disable=SC2086 # word lists
  "$dir/bin/python" -m pip install -q $deps
  # The exported trees keep their version number: reinstall them on every run.
  # shellcheck disable=SC2086
  "$dir/bin/python" -m pip install -q --force-reinstall --no-deps $trees
}

run_py() {
  ports_free
  local src=$work/src/nats.py
  venv "$work/venv-py" python3 "pytest pytest-asyncio nkeys" "$src/nats"
  local t=$src/nats/tests
  local tests=(
    "$t/test_client_nkeys.py"
    "$t/test_client.py::ClientReconnectTest"
    "$t/test_client.py::ClientAuthTokenTest"
    "$t/test_client.py::NoAuthUserClientTest"
    "$t/test_client.py::ClientServerPoolTest"
    "$t/test_client.py::ClientReconnectToServerHandlerTest"
    "$t/test_client.py::ClientLameDuckModeTest"
  )
  if [[ $unsupported == 1 ]]; then
    tests+=("$t/test_client.py::ClusterDiscoveryReconnectTest")
  fi
  echo "== py: ${#tests[@]} test files/classes"
  # The harness takes ./nats-server first: run from the directory holding the wrapper.
  (cd "$work/run-py" && timeout 1800 "$work/venv-py/bin/python" -m pytest -p no:cacheprovider -v \
    --durations=0 "${tests[@]}") > "$logs/py.log" 2>&1 || true
  record py
}

python313() { # prints a Python >= 3.13, or nothing
  local candidate
  for candidate in python3 python3.13 python3.14 "$HOME"/.pyenv/versions/3.1[3-9]*/bin/python; do
    if "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 13))' 2>/dev/null; then
      echo "$candidate"
      return
    fi
  done
}

run_pycore() {
  local python
  python=$(python313)
  if [[ -z $python ]]; then
    summary+=("pycore: not run (no Python >= 3.13)")
    return
  fi
  local src=$work/src/nats.py
  venv "$work/venv-pycore" "$python" "pytest pytest-asyncio nkeys" "$src/nats-server $src/nats-core"
  local k='(auth or token or nkey or jwt or cred or user or pass or nonce) and not token_shapes and not invalid_subject'
  echo "== pycore: tests/test_client.py -k '$k'"
  (cd "$src/nats-core" && PATH=$work/bin:$PATH timeout 1800 "$work/venv-pycore/bin/python" -m pytest \
    -p no:cacheprovider -v tests/test_client.py -k "$k") \
    > "$logs/pycore.log" 2>&1 || true
  record pycore
}

run_rs() {
  local src=$work/src/nats.rs
  export CARGO_TARGET_DIR=$natsrs_target
  local client_tests=(
    client::token_auth client::user_pass_auth client::required_auth_not_provided
    client::user_pass_auth_wrong_pass client::multiple_auth_methods client::custom_auth_callback
    client::custom_auth_callback_jwt
  )
  echo "== rs: nkey_tests, jwt_tests, client_tests ${client_tests[*]}"
  (
    cd "$src/async-nats"
    cargo test --no-run --test nkey_tests --test jwt_tests --test client_tests
    export PATH=$work/bin:$PATH
    timeout 1800 cargo test --test nkey_tests --test jwt_tests || true
    timeout 1800 cargo test --test client_tests -- --exact "${client_tests[@]}" || true
  ) > "$logs/rs.log" 2>&1 || echo "rs: build failed, see $logs/rs.log"
  record rs
}

run_pytls() {
  ports_free 8080 8081 4443 4545 9090 8444 8445
  local src=$work/src/nats.py
  venv "$work/venv-py" python3 "pytest pytest-asyncio nkeys aiohttp" "$src/nats"
  # The root holds a `nats-server` directory (a Python package), so the harness passes over
  # ./nats-server and takes the copy next to its utils.py.
  cp "$work/bin/nats-server" "$src/nats/tests/nats-server"
  local t=nats/tests
  local tests=(
    "$t/test_client.py::ClientTLSTest"
    "$t/test_client.py::ClientTLSHandshakeFirstTest"
    "$t/test_client.py::ClientTLSReconnectTest"
    "$t/test_client_websocket.py"
  )
  echo "== pytls: ${#tests[@]} test files/classes"
  # ClientTLSHandshakeFirstTest skips itself unless told the server is v2.10.0 or newer, as
  # nats.py's CI tells it: both servers under test speak for 2.14.0.
  (cd "$src" && NATS_SERVER_VERSION=${NATS_SERVER_VERSION:-v2.14.0} timeout 1800 "$work/venv-py/bin/python" -m pytest -p no:cacheprovider -v \
    --durations=0 "${tests[@]}") > "$logs/pytls.log" 2>&1 || true
  record pytls
}

run_rstls() {
  ports_free 4443 4545 9090 8444 8445
  local src=$work/src/nats.rs
  export CARGO_TARGET_DIR=$natsrs_target
  echo "== rstls: tls_tests, websocket_test, client_tests client::connect_invalid_tls_over_ip"
  (
    cd "$src/async-nats"
    cargo test --no-run --test tls_tests --test websocket_test --test client_tests
    export PATH=$work/bin:$PATH
    # A test whose server does not start retries its connect for ever: bound each binary (past
    # the 60 s after which cargo names it as still running).
    timeout 120 cargo test --test tls_tests || true
    timeout 120 cargo test --test websocket_test || true
    timeout 120 cargo test --test client_tests -- --exact client::connect_invalid_tls_over_ip || true
  ) > "$logs/rstls.log" 2>&1 || echo "rstls: build failed, see $logs/rstls.log"
  record rstls
}

run_rsjs() {
  local src=$work/src/nats.rs
  export CARGO_TARGET_DIR=$natsrs_target
  local skip=()
  [[ $unsupported == 1 ]] || skip=(--skip jetstream::create_stream_with_replicas)
  echo "== rsjs: jetstream_tests, kv_tests, object_store ${skip[*]}"
  (
    cd "$src/async-nats"
    cargo test --no-run --test jetstream_tests --test kv_tests --test object_store
    export PATH=$work/bin:$PATH
    # A test that waits on a message the server never sends waits for ever: bound each binary
    # (the reference needs about 140 s, 110 s and 5 s). A binary ended this way prints no
    # failure details: rerun its failing tests one by one to see them.
    timeout 480 cargo test --test jetstream_tests -- "${skip[@]}" || true
    timeout 420 cargo test --test kv_tests || true
    timeout 240 cargo test --test object_store || true
  ) > "$logs/rsjs.log" 2>&1 || echo "rsjs: build failed, see $logs/rsjs.log"
  record rsjs
}

run_pyjs() {
  ports_free
  local src=$work/src/nats.py
  venv "$work/venv-py" python3 "pytest pytest-asyncio pytest-timeout nkeys" "$src/nats"
  # As `pytls`: run from the repository's root, as nats.py's CI does (the object-store tests
  # upload ./pyproject.toml and ./README.md), with the server copy next to utils.py.
  cp "$work/bin/nats-server" "$src/nats/tests/nats-server"
  echo "== pyjs: nats/tests/test_js.py"
  # test_fetch_cancelled_errors_raised uses unittest.mock without importing it (in CI another
  # test file has imported it): load it first. A test waiting on a message that never comes is
  # ended by pytest-timeout and counts as FAIL.
  (cd "$src" && timeout 2700 "$work/venv-py/bin/python" -m pytest -p no:cacheprovider -p unittest.mock -v \
    --timeout 120 --durations=0 nats/tests/test_js.py) > "$logs/pyjs.log" 2>&1 || true
  record pyjs
}

run_pyjsnew() {
  local python
  python=$(python313)
  if [[ -z $python ]]; then
    summary+=("pyjsnew: not run (no Python >= 3.13)")
    return
  fi
  local src=$work/src/nats.py pkg
  venv "$work/venv-pycore" "$python" "pytest pytest-asyncio pytest-timeout nkeys" \
    "$src/nats-server $src/nats-core $src/nats-jetstream $src/nats-key-value"
  : > "$logs/pyjsnew.log"
  for pkg in nats-jetstream nats-key-value; do
    echo "== pyjsnew: $pkg/tests"
    # Each package's own pyproject.toml holds its pytest settings (asyncio_mode = auto).
    (cd "$src/$pkg" && PATH=$work/bin:$PATH timeout 2400 "$work/venv-pycore/bin/python" -m pytest \
      -p no:cacheprovider -v --timeout 120 tests) 2>&1 | sed -E "s#^tests/#$pkg/tests/#" \
      >> "$logs/pyjsnew.log" || true
  done
  record pyjsnew
}

IFS=, read -r -a chosen <<< "$suites"
for suite in "${chosen[@]}"; do
  case $suite in
    py) export_client nats.py; run_py ;;
    pycore) [[ -d $work/src/nats.py/nats-core ]] || export_client nats.py; run_pycore ;;
    rs) export_client nats.rs; run_rs ;;
    pytls) [[ -d $work/src/nats.py/nats/tests ]] || export_client nats.py; run_pytls ;;
    rstls) [[ -d $work/src/nats.rs/async-nats ]] || export_client nats.rs; run_rstls ;;
    rsjs) [[ -d $work/src/nats.rs/async-nats ]] || export_client nats.rs; run_rsjs ;;
    pyjs) [[ -d $work/src/nats.py/nats/tests ]] || export_client nats.py; run_pyjs ;;
    pyjsnew) [[ -d $work/src/nats.py/nats-jetstream ]] || export_client nats.py; run_pyjsnew ;;
    *) die "unknown suite $suite (py, pycore, rs, pytls, rstls, rsjs, pyjs, pyjsnew)" ;;
  esac
done

echo
echo "server: $server"
printf '%s\n' "${summary[@]}"
grep -h '^FAIL ' "$logs"/*.results 2>/dev/null || true
exit $status
