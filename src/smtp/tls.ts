import { existsSync, readFileSync, renameSync } from 'node:fs';
import { X509Certificate } from 'node:crypto';
import { isIP } from 'node:net';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import { ensurePrivateDir, tightenFiles, writePrivateFile } from '../lib/private-files.ts';

export interface TlsMaterial {
  key: string;
  cert: string;
  /** 'configured' (operator PEM files) or 'self-signed' (development mode, kept in the data dir). */
  source: 'configured' | 'self-signed';
}

const DEV_DIR = 'smtp-tls';

/**
 * The certificate for STARTTLS and the implicit-TLS port (docs/smtp.md "Connecting"):
 * POSTYARD_SMTP_TLS_CERT/KEY when set; else, in development mode, a self-signed pair generated on
 * first start and reused afterwards (so clients that pinned it keep working across restarts);
 * else null, and the server offers no TLS at all.
 */
export async function resolveTls(config: Config, logger: Logger): Promise<TlsMaterial | null> {
  if (config.smtpTlsCert && config.smtpTlsKey) {
    return {
      cert: readFileSync(config.smtpTlsCert, 'utf8'),
      key: readFileSync(config.smtpTlsKey, 'utf8'),
      source: 'configured',
    };
  }
  if (!config.devMode) return null;

  const dir = join(config.dataDir, DEV_DIR);
  const certFile = join(dir, 'cert.pem');
  const keyFile = join(dir, 'key.pem');
  ensurePrivateDir(dir);
  tightenFiles(keyFile, certFile);
  if (existsSync(certFile) && existsSync(keyFile)) {
    const cert = readFileSync(certFile, 'utf8');
    // An expired development certificate is replaced rather than served: clients would refuse it.
    if (Date.parse(new X509Certificate(cert).validTo) > Date.now() + 24 * 3600_000) {
      return { cert, key: readFileSync(keyFile, 'utf8'), source: 'self-signed' };
    }
  }

  const name = config.ehloName.replace(/^\[|\]$/g, '');
  const altNames: { type: 2 | 7; value?: string; ip?: string }[] = [
    { type: 2, value: 'localhost' },
    { type: 7, ip: '127.0.0.1' },
    { type: 7, ip: '::1' },
  ];
  if (isIP(name)) {
    if (name !== '127.0.0.1') altNames.push({ type: 7, ip: name });
  } else if (name !== 'localhost') {
    altNames.push({ type: 2, value: name });
  }
  const now = Date.now();
  // Loaded only here: selfsigned pulls in a whole X.509 library, the slowest import of a start.
  const { generate } = await import('selfsigned');
  const pems = await generate([{ name: 'commonName', value: isIP(name) ? 'localhost' : name }], {
    keySize: 2048,
    algorithm: 'sha256',
    notBeforeDate: new Date(now - 3600_000),
    notAfterDate: new Date(now + 5 * 365 * 24 * 3600_000),
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames },
    ],
  });
  // Write-then-rename so a second node starting on the same data dir never reads half a file.
  const suffix = `.${process.pid}.tmp`;
  writePrivateFile(keyFile + suffix, pems.private);
  writePrivateFile(certFile + suffix, pems.cert);
  renameSync(keyFile + suffix, keyFile);
  renameSync(certFile + suffix, certFile);
  logger.warn(
    { cert: certFile },
    'development mode: generated a self-signed SMTP TLS certificate (clients must not verify it)',
  );
  return { cert: pems.cert, key: pems.private, source: 'self-signed' };
}
