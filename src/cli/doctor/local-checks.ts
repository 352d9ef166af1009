import { createPrivateKey, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { sql } from 'kysely';
import type { Config } from '../../config.ts';
import { type Database, openDatabase } from '../../db/index.ts';
import { migrations } from '../../db/migrations/index.ts';
import { fail, type Finding, ok, warn } from './findings.ts';

/** Settings that are valid but wrong for a server that sends real mail. */
export function checkConfig(cfg: Config): Finding[] {
  const out: Finding[] = [];
  if (cfg.devMode) {
    out.push(
      warn(
        'config',
        'development mode is on (self-signed TLS, private MX targets allowed)',
        'unset POSTYARD_DEV_MODE in production',
      ),
    );
  }
  if (cfg.ehloName.startsWith('[')) {
    out.push(
      fail(
        'config',
        `the EHLO name is an address literal (${cfg.ehloName}); receiving servers expect a host name`,
        "set POSTYARD_EHLO_NAME to this host's fully qualified name (the one its PTR record gives)",
      ),
    );
  }
  if (cfg.bounceHost === 'localhost') {
    out.push(
      fail(
        'config',
        'the bounce host is "localhost": sending domains get no SPF and no return-path record, and bounces cannot come back',
        'set POSTYARD_BOUNCE_HOST (or POSTYARD_EHLO_NAME) to a public host name that routes back to this server',
      ),
    );
  }
  if (!cfg.publicUrl.startsWith('https://')) {
    out.push(
      warn(
        'config',
        `the public URL ${cfg.publicUrl} is not https (tracking and unsubscribe links)`,
        'set POSTYARD_PUBLIC_URL to the https address of this server',
      ),
    );
  }
  if (out.length === 0) out.push(ok('config', 'configuration loaded'));
  return out;
}

/** Opens the database and looks for migrations not applied yet; the database is returned for later checks. */
export async function checkDatabase(cfg: Config): Promise<{ findings: Finding[]; database: Database | null }> {
  const what = cfg.databaseUrl ? 'PostgreSQL' : `SQLite in ${cfg.dataDir}`;
  let database: Database | null = null;
  try {
    database = openDatabase({ databaseUrl: cfg.databaseUrl, dataDir: cfg.dataDir });
    await database.ping();
  } catch (err) {
    await database?.close().catch(() => {});
    const reason = err instanceof Error ? err.message : String(err);
    return {
      database: null,
      findings: [
        fail(
          'database',
          `cannot reach ${what}: ${reason}`,
          'check DATABASE_URL / POSTYARD_DATA_DIR and that the database is up',
        ),
      ],
    };
  }
  let applied = new Set<string>();
  try {
    const rows = await sql<{ name: string }>`select name from kysely_migration`.execute(database.db);
    applied = new Set(rows.rows.map((r) => r.name));
  } catch {
    // No migration table: nothing applied yet.
  }
  const pending = Object.keys(migrations).filter((m) => !applied.has(m));
  return {
    database,
    findings: [
      pending.length === 0
        ? ok('database', `${what} reachable, schema up to date`)
        : warn(
            'database',
            `${pending.length} migration(s) not applied: ${pending.join(', ')}`,
            'run `postyard migrate` (or start, which applies them)',
          ),
    ],
  };
}

const DAY_MS = 24 * 3600_000;
/** Certificates expiring sooner than this are reported (renewal jobs usually run at 30 days). */
const EXPIRY_WARNING_DAYS = 21;

/** The SMTP TLS certificate: readable, matching its key, valid for the EHLO name, not about to expire. */
export function checkTlsCertificate(cfg: Config, now = Date.now()): Finding[] {
  if (!cfg.smtpTlsCert || !cfg.smtpTlsKey) {
    return cfg.devMode
      ? [
          warn(
            'tls',
            'no certificate configured: development mode serves a self-signed one',
            'set POSTYARD_SMTP_TLS_CERT and POSTYARD_SMTP_TLS_KEY',
          ),
        ]
      : [
          fail(
            'tls',
            'no certificate configured: SMTP clients cannot use STARTTLS',
            'set POSTYARD_SMTP_TLS_CERT and POSTYARD_SMTP_TLS_KEY (PEM files)',
          ),
        ];
  }
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(readFileSync(cfg.smtpTlsCert));
  } catch (err) {
    return [
      fail(
        'tls',
        `cannot read ${cfg.smtpTlsCert}: ${(err as Error).message}`,
        'point POSTYARD_SMTP_TLS_CERT at a PEM certificate',
      ),
    ];
  }
  const out: Finding[] = [];
  try {
    if (!cert.checkPrivateKey(createPrivateKey(readFileSync(cfg.smtpTlsKey)))) {
      out.push(
        fail(
          'tls',
          `${cfg.smtpTlsKey} is not the key of ${cfg.smtpTlsCert}`,
          'configure the key that belongs to the certificate',
        ),
      );
    }
  } catch (err) {
    out.push(
      fail(
        'tls',
        `cannot read ${cfg.smtpTlsKey}: ${(err as Error).message}`,
        'point POSTYARD_SMTP_TLS_KEY at a PEM private key',
      ),
    );
  }
  const validTo = Date.parse(cert.validTo);
  const days = Math.floor((validTo - now) / DAY_MS);
  if (validTo <= now) {
    out.push(fail('tls', `the certificate expired on ${cert.validTo}`, 'renew it and restart (or reload) Postyard'));
  } else if (days < EXPIRY_WARNING_DAYS) {
    out.push(warn('tls', `the certificate expires in ${days} day(s) (${cert.validTo})`, 'renew it'));
  }
  const name = cfg.ehloName.replace(/^\[|\]$/g, '');
  const matches = isIP(name) ? cert.checkIP(name) !== undefined : cert.checkHost(name) !== undefined;
  if (!matches) {
    out.push(
      fail(
        'tls',
        `the certificate (${cert.subject.replace(/\n/g, ', ')}) is not valid for the EHLO name ${name}`,
        'use a certificate whose subjectAltName holds the EHLO name, or set POSTYARD_EHLO_NAME to a name it holds',
      ),
    );
  }
  if (out.length === 0) out.push(ok('tls', `certificate valid for ${name} until ${cert.validTo} (${days} days)`));
  return out;
}
