/**
 * Prints the OpenAPI document the server serves at GET /v1/openapi.json (built in-process on a
 * throwaway SQLite data directory), or writes it to the file named by the first argument. Used
 * by `npm run lint:openapi` (Redocly CLI) and anyone who wants the document without a server.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { fetchOpenApiDocument } from '../packages/client/scripts/generate.ts';

const doc = `${JSON.stringify(await fetchOpenApiDocument(), null, 2)}\n`;
const out = process.argv[2];
if (out) {
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, doc);
} else process.stdout.write(doc);
