import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { DASHBOARD_PAGES } from './page-list.ts';

/** Where `npm run build:dashboard` writes the single-page app. */
export const DEFAULT_DIST_DIR = fileURLToPath(new URL('../../../dashboard/dist/', import.meta.url));

/**
 * Strict by default: only our own bundle runs, and the pages cannot be framed. React sets style
 * through the CSSOM, which style-src does not restrict, so no 'unsafe-inline' is needed.
 */
const SECURITY_HEADERS: Record<string, string> = {
  'Content-Security-Policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
    "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  'X-Frame-Options': 'DENY',
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'same-origin',
};

const MISSING_PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Postyard dashboard not built</title></head>
<body>
<h1>The dashboard is not built</h1>
<p>The API is running, but the dashboard's files (<code>dashboard/dist</code>) are missing.</p>
<p>Build them with <code>npm run build:dashboard</code> (or run <code>npm install</code>, which builds them), then reload this page.</p>
</body></html>
`;

function sendSecure(reply: FastifyReply) {
  for (const [k, v] of Object.entries(SECURITY_HEADERS)) reply.header(k, v);
  return reply;
}

/**
 * The built single-page app: hashed assets under /assets/ (cached for a year), and index.html
 * for each page path (never cached, so a new build is picked up at once). When the build is
 * missing the pages answer 503 with a page saying how to build it; the API is unaffected.
 * The dist folder is looked up per request until found, so building while running works too.
 */
export async function registerDashboardPages(app: FastifyInstance, distDir: string = DEFAULT_DIST_DIR) {
  const indexFile = join(distDir, 'index.html');
  const assetsDir = join(distDir, 'assets');
  if (!existsSync(indexFile)) {
    app.log.warn({ distDir }, 'dashboard is not built: run `npm run build:dashboard`; its pages answer 503 until then');
  }
  await app.register(fastifyStatic, {
    root: assetsDir,
    prefix: '/assets/',
    decorateReply: false,
    index: false,
    dotfiles: 'deny',
    immutable: true,
    maxAge: '365d',
    schemaHide: true,
  });

  const handler = async (_req: unknown, reply: FastifyReply) => {
    sendSecure(reply).header('Cache-Control', 'no-store');
    let html: string;
    try {
      html = await readFile(indexFile, 'utf8');
    } catch {
      return reply.code(503).header('Retry-After', '60').type('text/html; charset=utf-8').send(MISSING_PAGE);
    }
    return reply.type('text/html; charset=utf-8').send(html);
  };
  // Every page of page-list.ts (docs/dashboard.md "Pages"); anything else stays a 404.
  for (const { path } of DASHBOARD_PAGES) {
    app.get(path, { config: { public: true, dashboard: 'page' }, schema: { hide: true } }, handler);
  }
}
