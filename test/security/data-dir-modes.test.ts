/**
 * The data dir holds the SQLite database (every tenant's data), the master key and, in
 * development mode, the SMTP TLS key: only the service's user may read them, whatever the umask
 * the operator started it with, and an install made by an older version is tightened on start.
 * Runs the real `postyard start` (SQLite in the data dir, api + smtp roles, development mode so
 * the TLS pair is generated there).
 */
import { chmodSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, killChildren, startServer } from '../helpers/server-process.ts';

const root = mkdtempSync(join(tmpdir(), 'postyard-modes-'));
const dataDir = join(root, 'data');

const DIRS = ['', 'smtp-tls'];
const FILES = [
  'postyard.sqlite',
  'postyard.sqlite-wal',
  'postyard.sqlite-shm',
  'master.key',
  'smtp-tls/key.pem',
  'smtp-tls/cert.pem',
];

const modeOf = (rel: string) => (statSync(join(dataDir, rel)).mode & 0o777).toString(8);

/** `postyard start` with umask 000 (inherited by the child): nothing may rely on the umask. */
async function startAndStop(): Promise<void> {
  const previous = process.umask(0o000);
  try {
    const [smtp, smtps] = [await freePort(), await freePort()];
    const server = await startServer(['--roles', 'api,smtp'], {
      env: {
        POSTYARD_DATA_DIR: dataDir,
        POSTYARD_DEV_MODE: 'true',
        POSTYARD_SMTP_HOST: '127.0.0.1',
        POSTYARD_SMTP_PORT: String(smtp),
        POSTYARD_SMTPS_PORT: String(smtps),
        POSTYARD_LOG_LEVEL: 'warn',
      },
      timeoutMs: 120_000,
    });
    try {
      // Modes are checked while the server runs: -wal and -shm exist only while it has the file open.
      const modes = Object.fromEntries([
        ...DIRS.map((d) => [d || '.', modeOf(d)]),
        ...FILES.map((f) => [f, modeOf(f)]),
      ]);
      expect(modes).toEqual({
        '.': '700',
        'smtp-tls': '700',
        ...Object.fromEntries(FILES.map((f) => [f, '600'])),
      });
    } finally {
      await server.stop('SIGTERM', 60_000);
    }
  } finally {
    process.umask(previous);
  }
}

describe('data dir permissions', () => {
  afterAll(() => {
    killChildren();
    rmSync(root, { recursive: true, force: true });
  });

  it('a fresh data dir is 0700 and the database, WAL, shared memory, master key and TLS files are 0600 (umask 000)', async () => {
    await startAndStop();
  });

  it('an existing install with world-readable files is tightened on start', async () => {
    chmodSync(dataDir, 0o755);
    chmodSync(join(dataDir, 'smtp-tls'), 0o755);
    for (const f of ['postyard.sqlite', 'master.key', 'smtp-tls/key.pem', 'smtp-tls/cert.pem']) {
      chmodSync(join(dataDir, f), 0o644);
    }
    expect(modeOf('postyard.sqlite')).toBe('644');
    await startAndStop();
  });
});
