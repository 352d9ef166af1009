import { chmodSync, closeSync, mkdirSync, openSync, writeFileSync } from 'node:fs';

/**
 * Files in the data dir (the SQLite database and its -wal/-shm, master.key, the development TLS
 * key, the node identity) are readable by the service's user only: 0700 directories, 0600 files.
 * Modes are set with chmod after creating, so they do not depend on the umask the service was
 * started with (SQLite itself creates files 0644 whatever the umask), and an install made by an
 * older version is tightened on the next start.
 */

const DIR_MODE = 0o700;
const FILE_MODE = 0o600;

function chmodIfPresent(path: string, mode: number): void {
  try {
    chmodSync(path, mode);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return;
    // Owned by another user (e.g. a mounted volume): starting is still better than refusing to.
    if (code === 'EPERM' || code === 'EROFS') {
      process.emitWarning(`could not restrict ${path} to mode ${mode.toString(8)}: ${code}`, 'PostyardPermissions');
      return;
    }
    throw err;
  }
}

/** mkdir -p, then 0700 on the directory itself (created or already there). */
export function ensurePrivateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: DIR_MODE });
  chmodIfPresent(dir, DIR_MODE);
}

/** 0600 on each file that exists (missing ones are skipped). */
export function tightenFiles(...files: string[]): void {
  for (const f of files) chmodIfPresent(f, FILE_MODE);
}

/** Creates `file` empty if missing (so a library that opens it later finds it private), then 0600. */
export function ensurePrivateFile(file: string): void {
  closeSync(openSync(file, 'a', FILE_MODE));
  chmodIfPresent(file, FILE_MODE);
}

/** writeFileSync, 0600 whatever the umask and whatever mode an existing file had. */
export function writePrivateFile(file: string, data: string | Uint8Array): void {
  writeFileSync(file, data, { mode: FILE_MODE });
  chmodIfPresent(file, FILE_MODE);
}
