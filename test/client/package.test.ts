/**
 * What users install: the package builds (tsc to dist: ESM, and CommonJS in dist/cjs, each with
 * .d.ts; the `prepare` script), its tarball holds both builds, and the built code sends mail from
 * plain Node (no tsx, no sources) with the three lines of the quickstart, by `import` and by
 * `require`. publint and Are the Types Wrong check the packed package in CI (.ci/run).
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SPAWN_TEST_TIMEOUT_MS } from '../helpers/server-process.ts';
import { countRows, type LiveServer, startLiveServer } from './helpers.ts';

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, '../..');
const PKG = join(ROOT, 'packages/client');

let live: LiveServer;
beforeAll(async () => {
  live = await startLiveServer();
  // The same command `npm install` runs through the package's prepare script.
  await run('npm', ['run', 'build', '--workspace', '@postyard/client'], { cwd: ROOT });
}, SPAWN_TEST_TIMEOUT_MS);
afterAll(async () => {
  await live?.close();
});

// npm and node are spawned in every test: minutes under load, not vitest's 30 s.
describe('@postyard/client as installed', { timeout: SPAWN_TEST_TIMEOUT_MS }, () => {
  it('the package tarball holds the ESM build and its type declarations', async () => {
    const { stdout } = await run(
      'npm',
      ['pack', '--dry-run', '--json', '--ignore-scripts', '--workspace', '@postyard/client'],
      {
        cwd: ROOT,
      },
    );
    const files = (JSON.parse(stdout) as { files: { path: string }[] }[])[0]?.files.map((f) => f.path) ?? [];
    expect(files).toEqual(
      expect.arrayContaining([
        'package.json',
        'dist/index.js',
        'dist/index.d.ts',
        'dist/cjs/index.js',
        'dist/cjs/index.d.ts',
        'dist/cjs/package.json',
        'README.md',
        'LICENSE',
      ]),
    );
    // What npm shows on the package page and what publint asks for.
    const manifest = JSON.parse(readFileSync(join(PKG, 'package.json'), 'utf8')) as Record<string, unknown>;
    expect(manifest).toMatchObject({
      license: 'MIT',
      repository: { type: 'git', directory: 'packages/client' },
      bugs: { url: expect.stringMatching(/^https:\/\//) },
      homepage: expect.stringMatching(/^https:\/\//),
      keywords: expect.arrayContaining(['email']),
    });
    expect(readFileSync(join(PKG, 'LICENSE'), 'utf8')).toContain('MIT License');
    // No public repository yet: the placeholder host is reserved (.invalid), the README says so,
    // and prepublishOnly refuses to publish with it.
    const placeholder = JSON.stringify(manifest).includes('repository-not-published-yet.invalid');
    if (placeholder) {
      expect(readFileSync(join(PKG, 'README.md'), 'utf8')).toContain('**Not published yet.**');
      expect((manifest.scripts as Record<string, string>).prepublishOnly).toContain('.invalid/');
    }
    expect(manifest.exports).toEqual({
      '.': {
        import: { types: './dist/index.d.ts', default: './dist/index.js' },
        require: { types: './dist/cjs/index.d.ts', default: './dist/cjs/index.js' },
      },
      './package.json': './package.json',
    });
    expect(JSON.parse(readFileSync(join(PKG, 'dist/cjs/package.json'), 'utf8'))).toEqual({ type: 'commonjs' });
    expect(files.some((f) => f.startsWith('scripts/'))).toBe(false);
    expect(existsSync(join(PKG, 'dist/generated/openapi.d.ts'))).toBe(true);
  });

  it('plain Node imports the build by package name and sends a transmission in three lines', async () => {
    const before = await countRows(live.ctx, 'transmissions', live.tenant.tenantId);
    const script = [
      "import { Postyard } from '@postyard/client';",
      'const client = new Postyard({ apiKey: process.env.POSTYARD_KEY, baseUrl: process.env.POSTYARD_URL });',
      "const r = await client.transmissions.send({ recipients: [{ email: 'ann@example.com' }], content: { subject: 'Hi', text: 'Hello' } });",
      'console.log(r.transmission_id);',
    ].join('\n');
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], {
      cwd: ROOT,
      env: { ...process.env, POSTYARD_KEY: live.tenant.apiKey, POSTYARD_URL: live.baseUrl, NODE_OPTIONS: '' },
    });
    expect(stdout.trim()).toMatch(/^[0-9a-f-]{36}$/);
    expect(await countRows(live.ctx, 'transmissions', live.tenant.tenantId)).toBe(before + 1);
  });

  it('plain Node require()s the CommonJS build and sends a transmission', async () => {
    const before = await countRows(live.ctx, 'transmissions', live.tenant.tenantId);
    const script = [
      "const { Postyard, PostyardError, verifyWebhook } = require('@postyard/client');",
      "if (typeof verifyWebhook !== 'function' || !(PostyardError.prototype instanceof Error)) process.exit(3);",
      'const client = new Postyard({ apiKey: process.env.POSTYARD_KEY, baseUrl: process.env.POSTYARD_URL });',
      "client.transmissions.send({ recipients: [{ email: 'ann@example.com' }], content: { subject: 'Hi', text: 'Hello' } })",
      '  .then((r) => console.log(r.transmission_id));',
    ].join('\n');
    const { stdout } = await run(process.execPath, ['--input-type=commonjs', '-e', script], {
      cwd: ROOT,
      env: { ...process.env, POSTYARD_KEY: live.tenant.apiKey, POSTYARD_URL: live.baseUrl, NODE_OPTIONS: '' },
    });
    expect(stdout.trim()).toMatch(/^[0-9a-f-]{36}$/);
    expect(await countRows(live.ctx, 'transmissions', live.tenant.tenantId)).toBe(before + 1);
  });
});
