/**
 * Configuration by environment (README.md "Configuration", docs/operations.md): defaults and one
 * clear error naming the variable.
 */
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, resolveMasterKey } from '../../src/config.ts';

const tmp = mkdtempSync(join(tmpdir(), 'postyard-config-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function configError(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error(`loadConfig accepted ${JSON.stringify(env)}`);
}

describe('defaults (README.md "Configuration")', () => {
  const c = loadConfig({});

  it('HTTP 127.0.0.1:3000, SMTP 2587, data dir ./data, SQLite', () => {
    expect(c.httpPort).toBe(3000);
    expect(c.httpHost).toBe('127.0.0.1');
    expect(c.smtpPort).toBe(2587);
    expect(c.dataDir).toBe(resolve('./data'));
    expect(c.databaseUrl).toBeNull();
  });

  it('/metrics of a node without the api role on 9464, bound like the HTTP API (docs/operations.md "Metrics")', () => {
    expect(c.metricsPort).toBe(9464);
    expect(c.metricsHost).toBe('127.0.0.1');
    const set = loadConfig({ POSTYARD_HTTP_HOST: '0.0.0.0', POSTYARD_METRICS_PORT: '9100' });
    expect([set.metricsHost, set.metricsPort]).toEqual(['0.0.0.0', 9100]);
    expect(loadConfig({ POSTYARD_HTTP_HOST: '0.0.0.0', POSTYARD_METRICS_HOST: '10.0.0.5' }).metricsHost).toBe(
      '10.0.0.5',
    );
    expect(configError({ POSTYARD_METRICS_PORT: '70000' }).message).toContain('POSTYARD_METRICS_PORT');
  });

  it('direct MX delivery on port 25 with the system resolver', () => {
    expect(c.relayUrl).toBeNull();
    expect(c.dnsServers).toBeNull();
    expect(c.mxPort).toBe(25);
  });

  it('safe switches off: no dev mode, no private webhook targets, no insecure AUTH, no TLS files', () => {
    expect(c.devMode).toBe(false);
    expect(c.allowPrivateWebhookTargets).toBe(false);
    expect(c.smtpAllowInsecureAuth).toBe(false);
    expect(c.smtpTlsCert).toBeNull();
    expect(c.smtpTlsKey).toBeNull();
  });

  it('brute-force budgets: 60 failed API-key / SMTP AUTH attempts per address, 10 failed sign-ins per account', () => {
    expect(c.authFailuresPerIp).toBe(60);
    expect(c.signInFailuresPerAccount).toBe(10);
    expect(loadConfig({ POSTYARD_SIGNIN_FAILURES_PER_ACCOUNT: '3' }).signInFailuresPerAccount).toBe(3);
    // 0 would turn the account lock off, which reopens guessing from rotating addresses.
    expect(configError({ POSTYARD_SIGNIN_FAILURES_PER_ACCOUNT: '0' }).message).toContain(
      'POSTYARD_SIGNIN_FAILURES_PER_ACCOUNT',
    );
  });

  it('delivery claims of at most 50 messages', () => {
    expect(c.deliveryClaimBatch).toBe(50);
  });

  it('rate limit 100 rps, burst 200; log level info; no master key until generated', () => {
    expect(c.rateLimitRps).toBe(100);
    expect(c.rateLimitBurst).toBe(200);
    expect(c.logLevel).toBe('info');
    expect(c.masterKey).toBeNull();
  });

  it('limits: 10 MB JSON body, 100 MB import, 24 h idempotency, auth cache at most 5 s', () => {
    expect(c.bodyLimitBytes).toBe(10 * 1024 * 1024);
    expect(c.importLimitBytes).toBe(100 * 1024 * 1024);
    expect(c.idempotencyTtlHours).toBe(24);
    expect(c.authCacheSeconds).toBeGreaterThanOrEqual(0);
    expect(c.authCacheSeconds).toBeLessThanOrEqual(5);
  });

  it('the EHLO name is never a bare single label', () => {
    expect(c.ehloName.includes('.') || /^\[[0-9a-fA-F:.]+\]$/.test(c.ehloName)).toBe(true);
  });

  it('is frozen', () => {
    expect(Object.isFrozen(c)).toBe(true);
  });
});

describe('values are read from the environment', () => {
  it('parses every documented variable', () => {
    const cert = join(tmp, 'cert.pem');
    const key = join(tmp, 'key.pem');
    writeFileSync(cert, 'x');
    writeFileSync(key, 'x');
    const c = loadConfig({
      POSTYARD_HTTP_PORT: '8080',
      POSTYARD_HTTP_HOST: '0.0.0.0',
      POSTYARD_SMTP_PORT: '587',
      POSTYARD_DATA_DIR: tmp,
      DATABASE_URL: 'postgres://u:p@db:5432/postyard',
      POSTYARD_RELAY_URL: 'smtp://user:pass@relay.example.com:587',
      POSTYARD_DNS_SERVERS: '127.0.0.1:5353, 10.0.0.2,[::1]:53',
      POSTYARD_MX_PORT: '2525',
      POSTYARD_DEV_MODE: 'true',
      POSTYARD_ALLOW_PRIVATE_WEBHOOK_TARGETS: '1',
      POSTYARD_SMTP_ALLOW_INSECURE_AUTH: 'yes',
      POSTYARD_SMTP_TLS_CERT: cert,
      POSTYARD_SMTP_TLS_KEY: key,
      POSTYARD_RATE_LIMIT_RPS: '0',
      POSTYARD_RATE_LIMIT_BURST: '5',
      POSTYARD_MASTER_KEY: 'ab'.repeat(32),
      POSTYARD_LOG_LEVEL: 'debug',
      POSTYARD_EHLO_NAME: 'mta.example.com',
      POSTYARD_DELIVERY_CLAIM_BATCH: '200',
    });
    expect(c).toMatchObject({
      httpPort: 8080,
      httpHost: '0.0.0.0',
      smtpPort: 587,
      dataDir: tmp,
      databaseUrl: 'postgres://u:p@db:5432/postyard',
      relayUrl: 'smtp://user:pass@relay.example.com:587',
      dnsServers: ['127.0.0.1:5353', '10.0.0.2', '[::1]:53'],
      mxPort: 2525,
      devMode: true,
      allowPrivateWebhookTargets: true,
      smtpAllowInsecureAuth: true,
      smtpTlsCert: cert,
      smtpTlsKey: key,
      rateLimitRps: 0,
      rateLimitBurst: 5,
      logLevel: 'debug',
      ehloName: 'mta.example.com',
      deliveryClaimBatch: 200,
    });
    expect(c.masterKey?.toString('hex')).toBe('ab'.repeat(32));
  });

  it('accepts postgresql:// too, a base64 master key and an address-literal EHLO name', () => {
    const c = loadConfig({
      DATABASE_URL: 'postgresql://localhost/x',
      POSTYARD_MASTER_KEY: Buffer.alloc(32, 7).toString('base64'),
      POSTYARD_EHLO_NAME: '[192.0.2.1]',
    });
    expect(c.databaseUrl).toBe('postgresql://localhost/x');
    expect(c.masterKey?.equals(Buffer.alloc(32, 7))).toBe(true);
    expect(c.ehloName).toBe('[192.0.2.1]');
  });

  it('POSTYARD_SOURCE_ADDRESSES: shared entries and address=tenant-id dedications (docs/ip-pools.md)', () => {
    const tenant = '0193a5b2-0000-7000-8000-000000000000';
    const c = loadConfig({ POSTYARD_SOURCE_ADDRESSES: `192.0.2.10, 2001:DB8::10=${tenant} ,192.0.2.10` });
    expect(c.sourceAddresses).toEqual(['192.0.2.10', '2001:db8::10']);
    expect(c.sourceDedications).toEqual({ '2001:db8::10': tenant });
    expect(loadConfig({}).sourceDedications).toEqual({});
  });

  it('treats empty values as unset', () => {
    const c = loadConfig({ POSTYARD_HTTP_PORT: '', DATABASE_URL: '  ' });
    expect(c.httpPort).toBe(3000);
    expect(c.databaseUrl).toBeNull();
  });
});

describe('a bad value throws ConfigError naming the variable', () => {
  const cases: [string, Record<string, string>][] = [
    ['POSTYARD_HTTP_PORT', { POSTYARD_HTTP_PORT: 'abc' }],
    ['POSTYARD_HTTP_PORT', { POSTYARD_HTTP_PORT: '70000' }],
    ['POSTYARD_HTTP_PORT', { POSTYARD_HTTP_PORT: '-1' }],
    ['POSTYARD_HTTP_PORT', { POSTYARD_HTTP_PORT: '80.5' }],
    ['POSTYARD_SMTP_PORT', { POSTYARD_SMTP_PORT: 'smtp' }],
    ['POSTYARD_MX_PORT', { POSTYARD_MX_PORT: '0' }],
    ['DATABASE_URL', { DATABASE_URL: 'mysql://root@localhost/postyard' }],
    ['DATABASE_URL', { DATABASE_URL: 'sqlite:///tmp/x.db' }],
    ['POSTYARD_RELAY_URL', { POSTYARD_RELAY_URL: 'http://relay.example.com' }],
    ['POSTYARD_DNS_SERVERS', { POSTYARD_DNS_SERVERS: 'garbage' }],
    ['POSTYARD_TRUST_PROXY', { POSTYARD_TRUST_PROXY: 'lb.example.com' }],
    ['POSTYARD_DB_POOL_SIZE', { POSTYARD_DB_POOL_SIZE: '0' }],
    ['POSTYARD_TRUST_PROXY', { POSTYARD_TRUST_PROXY: '10.0.0.0/33' }],
    ['POSTYARD_DNS_SERVERS', { POSTYARD_DNS_SERVERS: '127.0.0.1:53,dns.google' }],
    ['POSTYARD_DNS_SERVERS', { POSTYARD_DNS_SERVERS: '1.1.1.1:port' }],
    ['POSTYARD_EHLO_NAME', { POSTYARD_EHLO_NAME: 'localhost' }],
    ['POSTYARD_EHLO_NAME', { POSTYARD_EHLO_NAME: 'mailhost' }],
    ['POSTYARD_SMTP_TLS_KEY', { POSTYARD_SMTP_TLS_CERT: '/etc/ssl/cert.pem' }],
    ['POSTYARD_SMTP_TLS_CERT', { POSTYARD_SMTP_TLS_KEY: '/etc/ssl/key.pem' }],
    [
      'POSTYARD_SMTP_TLS_CERT',
      { POSTYARD_SMTP_TLS_CERT: '/nonexistent/c.pem', POSTYARD_SMTP_TLS_KEY: '/nonexistent/k.pem' },
    ],
    ['POSTYARD_MASTER_KEY', { POSTYARD_MASTER_KEY: 'too-short' }],
    ['POSTYARD_MASTER_KEY', { POSTYARD_MASTER_KEY: 'ab'.repeat(16) }],
    ['POSTYARD_MASTER_KEY', { POSTYARD_MASTER_KEY: Buffer.alloc(16).toString('base64') }],
    ['POSTYARD_DEV_MODE', { POSTYARD_DEV_MODE: 'maybe' }],
    ['POSTYARD_LOG_LEVEL', { POSTYARD_LOG_LEVEL: 'loud' }],
    ['POSTYARD_RATE_LIMIT_RPS', { POSTYARD_RATE_LIMIT_RPS: 'fast' }],
    ['POSTYARD_RATE_LIMIT_BURST', { POSTYARD_RATE_LIMIT_BURST: '-5' }],
    ['POSTYARD_AUTH_CACHE_SECONDS', { POSTYARD_AUTH_CACHE_SECONDS: '60' }],
    ['POSTYARD_BODY_LIMIT_MB', { POSTYARD_BODY_LIMIT_MB: '0' }],
    ['REDIS_URL', { REDIS_URL: 'localhost:6379' }],
    ['POSTYARD_DELIVERY_CLAIM_BATCH', { POSTYARD_DELIVERY_CLAIM_BATCH: '0' }],
    ['POSTYARD_DELIVERY_CLAIM_BATCH', { POSTYARD_DELIVERY_CLAIM_BATCH: '5000' }],
    ['POSTYARD_SOURCE_ADDRESSES', { POSTYARD_SOURCE_ADDRESSES: '192.0.2.300' }],
    ['POSTYARD_SOURCE_ADDRESSES', { POSTYARD_SOURCE_ADDRESSES: '192.0.2.10=acme' }],
    [
      'POSTYARD_SOURCE_ADDRESSES',
      { POSTYARD_SOURCE_ADDRESSES: '192.0.2.10=0193a5b2-0000-7000-8000-000000000000,192.0.2.10' },
    ],
  ];

  it.each(cases)('%s: %j', (variable, env) => {
    const err = configError(env);
    expect(err.variable).toBe(variable);
    expect(err.message.startsWith(`${variable}: `)).toBe(true);
    expect(err.message).not.toContain('\n');
    expect(err.message.length).toBeLessThan(300);
  });

  it('never echoes the value of a secret variable', () => {
    const secret = 'Zm9vYmFyYmF6cXV4c2VjcmV0';
    const err = configError({ POSTYARD_MASTER_KEY: secret });
    expect(err.message).not.toContain(secret);
  });
});

describe('master key', () => {
  it('is generated into the data dir on first start (mode 600) and reused afterwards', () => {
    const dir = mkdtempSync(join(tmp, 'mk-'));
    const c = loadConfig({ POSTYARD_DATA_DIR: dir });
    const first = resolveMasterKey(c);
    expect(first.length).toBe(32);
    const file = join(dir, 'master.key');
    expect(readFileSync(file, 'utf8').trim()).toBe(first.toString('hex'));
    if (process.platform !== 'win32') expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(resolveMasterKey(c).equals(first)).toBe(true);
  });

  it('POSTYARD_MASTER_KEY wins over the file; a corrupt file is a ConfigError', () => {
    const dir = mkdtempSync(join(tmp, 'mk-'));
    const given = Buffer.alloc(32, 9);
    expect(
      resolveMasterKey(loadConfig({ POSTYARD_DATA_DIR: dir, POSTYARD_MASTER_KEY: given.toString('hex') })),
    ).toEqual(given);
    writeFileSync(join(dir, 'master.key'), 'not a key');
    expect(() => resolveMasterKey(loadConfig({ POSTYARD_DATA_DIR: dir }))).toThrow(ConfigError);
  });
});
