import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ensurePrivateDir, tightenFiles, writePrivateFile } from '../lib/private-files.ts';
import { ConfigError, type Env, str } from './env.ts';
import type { Config } from './schema.ts';

/**
 * Settings that name keys and certificate files. Files named here are checked to exist (and
 * the CA file to hold a certificate) at load, so a typo stops the start instead of failing the
 * first TLS handshake; the master key is the one setting that may be created on disk.
 */

export function extraCaFileOf(env: Env): string | null {
  const extraCaFile = str(env, 'POSTYARD_EXTRA_CA_FILE') ?? null;
  if (extraCaFile) {
    if (!existsSync(extraCaFile)) throw new ConfigError('POSTYARD_EXTRA_CA_FILE', `file not found: ${extraCaFile}`);
    if (!readFileSync(extraCaFile, 'utf8').includes('-----BEGIN CERTIFICATE-----')) {
      throw new ConfigError('POSTYARD_EXTRA_CA_FILE', `${extraCaFile} holds no PEM certificate`);
    }
  }
  return extraCaFile;
}

/** POSTYARD_SMTP_TLS_CERT and _KEY: both or neither, each an existing file. */
export function smtpTlsFilesOf(env: Env): { cert: string | null; key: string | null } {
  const cert = str(env, 'POSTYARD_SMTP_TLS_CERT') ?? null;
  const key = str(env, 'POSTYARD_SMTP_TLS_KEY') ?? null;
  if ((cert === null) !== (key === null)) {
    throw new ConfigError(
      cert ? 'POSTYARD_SMTP_TLS_KEY' : 'POSTYARD_SMTP_TLS_CERT',
      'set both the certificate and the key',
    );
  }
  for (const [name, file] of [
    ['POSTYARD_SMTP_TLS_CERT', cert],
    ['POSTYARD_SMTP_TLS_KEY', key],
  ] as const) {
    if (file && !existsSync(file)) throw new ConfigError(name, `file not found: ${file}`);
  }
  return { cert, key };
}

function decodeMasterKey(raw: string): Buffer | null {
  if (/^[0-9a-fA-F]{64}$/.test(raw)) return Buffer.from(raw, 'hex');
  const b = Buffer.from(raw, 'base64');
  return b.length === 32 ? b : null;
}

/** POSTYARD_MASTER_KEY as given; null = use or create the data dir's (resolveMasterKey). */
export function masterKeyOf(env: Env): Buffer | null {
  const masterRaw = str(env, 'POSTYARD_MASTER_KEY');
  let masterKey: Buffer | null = null;
  if (masterRaw) {
    masterKey = decodeMasterKey(masterRaw);
    if (!masterKey) throw new ConfigError('POSTYARD_MASTER_KEY', 'must be 32 bytes as 64 hex chars or base64');
  }
  return masterKey;
}

/**
 * The master key from config, else the one generated into the data dir on first start.
 * Several nodes on PostgreSQL must share POSTYARD_MASTER_KEY (documented in operations.md).
 */
export function resolveMasterKey(config: Config): Buffer {
  if (config.masterKey) return config.masterKey;
  ensurePrivateDir(config.dataDir);
  const file = join(config.dataDir, 'master.key');
  if (existsSync(file)) {
    tightenFiles(file);
    const key = decodeMasterKey(readFileSync(file, 'utf8').trim());
    if (!key) throw new ConfigError('POSTYARD_MASTER_KEY', `${file} does not hold a valid 32-byte key`);
    return key;
  }
  const key = randomBytes(32);
  writePrivateFile(file, key.toString('hex'));
  return key;
}
