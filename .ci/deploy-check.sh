#!/usr/bin/env bash
# The Dockerfile's steps without Docker (Docker cannot run on the CI machine), so the deployment
# files do not rot: pack the package (its `prepare` runs `npm run build`: the server compiled to
# dist/ by tsc, the dashboard by Vite; devDependencies are installed here, as in the Dockerfile's
# build stage), check the tarball holds the compiled server and dashboard and no TypeScript
# sources, install it into a clean directory as a production install (--omit=dev: no tsx, no
# TypeScript), run `postyard --version` and `--help`, start it as a non-root user on a fresh data
# dir, wait for GET /healthz 200 (the Dockerfile's HEALTHCHECK) and GET /readyz 200, stop it with
# SIGTERM and expect exit 0. This is the one test of the compiled dist/: every other test runs the
# TypeScript sources (test/helpers/server-process.ts).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO=$PWD
WORK=$(mktemp -d "${TMPDIR:-/tmp}/postyard-deploy.XXXXXX")
PORT=${DEPLOY_CHECK_PORT:-39$((RANDOM % 900 + 100))}
PID=""
cleanup() {
  if [[ -n $PID ]] && kill -0 "$PID" 2>/dev/null; then kill -KILL "$PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

echo "deploy-check: npm pack (runs prepare: npm run build, the server to dist/ and the dashboard)"
npm pack --silent --pack-destination "$WORK" </dev/null >"$WORK/pack.out"
TARBALL="$WORK/$(tail -1 "$WORK/pack.out")"
echo "deploy-check: packed $(basename "$TARBALL") ($(du -k "$TARBALL" | cut -f1) kB)"
tar -tzf "$TARBALL" >"$WORK/contents"
for f in package/bin/postyard.js package/dist/cli/main.js package/dist/modules/delivery/render/render-thread.js \
  package/dist/db/sqlite-checkpoint-thread.js package/dashboard/dist/index.html package/LICENSE; do
  grep -qx "$f" "$WORK/contents" || { echo "deploy-check: $f is not in the tarball" >&2; exit 1; }
done
if grep -E '^package/(src|test|bench)/|\.ts$' "$WORK/contents" | grep -v '\.d\.ts$' | head -5 | grep .; then
  echo "deploy-check: the tarball holds TypeScript sources or tests (see above)" >&2
  exit 1
fi

echo "deploy-check: production install of the tarball into a clean directory"
mkdir -p "$WORK/app"
# With Postyard's override (npm applies overrides only from the top-level package.json; README
# "Node versions"): the install must not warn EBADENGINE on this Node.
echo '{"name":"postyard-deploy-check","private":true,"overrides":{"light-my-request":{"cookie":"^1.1.1"}}}' >"$WORK/app/package.json"
(cd "$WORK/app" && npm install --omit=dev --no-audit --no-fund "$TARBALL" </dev/null) 2>&1 | tee "$WORK/install.log"
if grep -q EBADENGINE "$WORK/install.log"; then
  echo "deploy-check: the production install warned EBADENGINE on $(node --version)" >&2
  exit 1
fi
APP="$WORK/app/node_modules/postyard"
for dev in vite vitest typescript tsx @biomejs/biome; do
  if [[ -e $WORK/app/node_modules/$dev ]]; then
    echo "deploy-check: devDependency $dev was installed by a production install" >&2
    exit 1
  fi
done
BIN="$WORK/app/node_modules/.bin/postyard"
echo "deploy-check: postyard --version: $("$BIN" --version </dev/null)"
"$BIN" --help </dev/null | grep -q '^Usage: postyard' || { echo "deploy-check: postyard --help printed no usage" >&2; exit 1; }

DATA="$WORK/data"
mkdir -p "$DATA"
RUN=()
if [[ $(id -u) == 0 ]]; then
  # As the container does: never as root. nobody owns only the data dir.
  chown nobody "$DATA"
  chmod 755 "$WORK" "$WORK/app"
  RUN=(setpriv --reuid=nobody --regid=nogroup --clear-groups --)
  getent group nogroup >/dev/null || RUN=(runuser -u nobody --)
fi

# The container's glibc malloc setting (Dockerfile ENV; docs/operations.md "Memory"), so the
# process checked here runs as the image's does.
TUNABLES=$(sed -n 's/^ *GLIBC_TUNABLES=\([^ ]*\).*/\1/p' "$REPO/Dockerfile")
[[ -n $TUNABLES ]] || { echo "deploy-check: the Dockerfile sets no GLIBC_TUNABLES" >&2; exit 1; }
# `npm start` and the systemd unit must run with the same setting as the image.
for f in package.json deploy/postyard.service; do
  grep -qF "$TUNABLES" "$REPO/$f" || { echo "deploy-check: $f does not set GLIBC_TUNABLES=$TUNABLES" >&2; exit 1; }
done
echo "deploy-check: starting as $(if ((${#RUN[@]})); then echo nobody; else id -un; fi) on 127.0.0.1:$PORT"
env -i PATH="$PATH" HOME="$DATA" NODE_ENV=production GLIBC_TUNABLES="$TUNABLES" \
  POSTYARD_DATA_DIR="$DATA" POSTYARD_HTTP_HOST=127.0.0.1 POSTYARD_HTTP_PORT="$PORT" \
  POSTYARD_SMTP_HOST=127.0.0.1 POSTYARD_SMTP_PORT=0 POSTYARD_EHLO_NAME=deploy-check.postyard.test \
  "${RUN[@]}" "$BIN" start >"$WORK/out.log" 2>&1 &
PID=$!

deadline=$((SECONDS + ${DEPLOY_CHECK_TIMEOUT:-120}))
until curl -fsS -o /dev/null "http://127.0.0.1:$PORT/healthz" 2>/dev/null; do
  if ! kill -0 "$PID" 2>/dev/null; then
    echo "deploy-check: postyard exited before /healthz answered:" >&2
    cat "$WORK/out.log" >&2
    exit 1
  fi
  if ((SECONDS > deadline)); then
    echo "deploy-check: /healthz did not answer 200 in time:" >&2
    cat "$WORK/out.log" >&2
    exit 1
  fi
  sleep 0.5
done
echo "deploy-check: /healthz 200 ($(curl -fsS "http://127.0.0.1:$PORT/healthz"))"
echo "deploy-check: /readyz $(curl -sS -o "$WORK/readyz" -w '%{http_code}' "http://127.0.0.1:$PORT/readyz") ($(cat "$WORK/readyz"))"
curl -fsS -o /dev/null "http://127.0.0.1:$PORT/readyz" || { echo "deploy-check: /readyz did not answer 200" >&2; exit 1; }
if [[ $(id -u) == 0 ]]; then
  user=$(ps -o user= -p "$(pgrep -P "$PID" -n || echo "$PID")" 2>/dev/null || true)
  echo "deploy-check: process user: ${user:-?}"
fi
# The dashboard, served from the tarball's dashboard/dist.
curl -fsS -o /dev/null -w 'deploy-check: GET / -> %{http_code}\n' "http://127.0.0.1:$PORT/" \
  || { echo "deploy-check: the dashboard (GET /) did not answer 200" >&2; exit 1; }

kill -TERM "$PID"
rc=0
wait "$PID" || rc=$?
PID=""
if [[ $rc != 0 ]]; then
  echo "deploy-check: exit code $rc after SIGTERM:" >&2
  cat "$WORK/out.log" >&2
  exit 1
fi
echo "deploy-check: stopped cleanly (exit 0)"
