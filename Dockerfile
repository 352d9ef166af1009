# syntax=docker/dockerfile:1
# Postyard container image (docs/deploy.md). .ci/deploy-check.sh performs the same steps without
# Docker in CI: pack, production install of the tarball, start as non-root, /healthz.

# --- build: all dependencies, the build (tsc and Vite, devDependencies), the package tarball ---
FROM node:22-bookworm-slim AS build
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY package.json package-lock.json ./
COPY packages/client/package.json packages/client/
RUN npm ci --ignore-scripts
COPY . .
# npm pack runs `prepare` (npm run build: the server compiled to dist/, the dashboard to
# dashboard/dist) and writes postyard-<version>.tgz holding both, without the TypeScript sources.
RUN npm pack --pack-destination /tmp && mv /tmp/postyard-*.tgz /tmp/postyard.tgz

# --- install: a production install of the tarball (no devDependencies, no tsx), natives built here ---
FROM node:22-bookworm-slim AS install
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/postyard
COPY --from=build /tmp/postyard.tgz /tmp/postyard.tgz
# (its own package.json must not be called "postyard": npm refuses to install a package into itself;
# the override is Postyard's own, which npm applies only from the top-level package.json: README
# "Node versions")
RUN echo '{"name":"postyard-image","private":true,"overrides":{"light-my-request":{"cookie":"^1.1.1"}}}' > package.json \
  && npm install --omit=dev --no-audit --no-fund /tmp/postyard.tgz

# --- runtime: no compilers, a non-root user, a data volume ---
FROM node:22-bookworm-slim
# glibc: a fixed mmap threshold keeps large transient buffers out of the main malloc heap, which
# otherwise keeps their pages resident (docs/operations.md "Memory").
ENV NODE_ENV=production \
    GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072 \
    POSTYARD_DATA_DIR=/var/lib/postyard \
    POSTYARD_HTTP_HOST=0.0.0.0 \
    POSTYARD_HTTP_PORT=3000 \
    POSTYARD_SMTP_HOST=0.0.0.0 \
    POSTYARD_SMTP_PORT=2587 \
    POSTYARD_INBOUND_HOST=0.0.0.0 \
    POSTYARD_INBOUND_PORT=2525 \
    PATH=/opt/postyard/node_modules/.bin:$PATH
RUN groupadd --system postyard && useradd --system --gid postyard --home-dir /var/lib/postyard postyard \
  && mkdir -p /var/lib/postyard && chown postyard:postyard /var/lib/postyard && chmod 700 /var/lib/postyard
COPY --from=install /opt/postyard /opt/postyard
USER postyard
WORKDIR /var/lib/postyard
VOLUME ["/var/lib/postyard"]
EXPOSE 3000 2587 2525
# Node's fetch: the slim image has no curl.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.POSTYARD_HTTP_PORT||3000)+'/healthz').then(r=>process.exit(r.status===200?0:1),()=>process.exit(1))"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["postyard"]
CMD ["start"]
