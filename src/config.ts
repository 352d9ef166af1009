import { isIP } from 'node:net';
import { existsSync, readFileSync } from 'node:fs';
import { availableParallelism, hostname } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import { relayFromUrl } from './modules/delivery/smtp/relay-url.ts';
import { NODE_ID_FORMAT } from './lib/node-identity.ts';
import { ensurePrivateDir, tightenFiles, writePrivateFile } from './lib/private-files.ts';

/**
 * Environment -> validated, typed, frozen config. Nothing else in the code reads process.env.
 * A bad value throws ConfigError naming the variable; the CLI prints that one line and exits 1.
 */
export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`${variable}: ${message}`);
    this.name = 'ConfigError';
  }
}

export type Role = 'api' | 'smtp' | 'worker' | 'inbound';
export const ALL_ROLES: readonly Role[] = ['api', 'smtp', 'worker', 'inbound'];

export interface Config {
  httpPort: number;
  httpHost: string;
  /**
   * `/metrics` listener of a node without the api role (POSTYARD_METRICS_PORT, default 9464;
   * POSTYARD_METRICS_HOST, default the HTTP host). With the api role /metrics is on the API port.
   */
  metricsPort: number;
  metricsHost: string;
  smtpPort: number;
  /** Implicit-TLS submission port; null = off. */
  smtpsPort: number | null;
  dataDir: string;
  /** This node's id (POSTYARD_NODE_ID); null = the one kept in <dataDir>/node-id. */
  nodeId: string | null;
  /** How often a node writes its heartbeat and checks the others'. */
  nodeHeartbeatSeconds: number;
  /** A node whose heartbeat stays unchanged this long is dead: its claims are taken over. */
  nodeTimeoutSeconds: number;
  /** postgres://... or null for SQLite in dataDir. */
  databaseUrl: string | null;
  /** Validated at load (relay-url.ts): TLS required and verified unless `?tls=none` / `?verify=false`. */
  relayUrl: string | null;
  /** POSTYARD_PACING_FILE: the operator's site limits and automation rules; null = config/pacing.yaml. */
  pacingFile: string | null;
  /**
   * POSTYARD_PACING (default true): rate limits and automation rules on. false: only the
   * per-site connection limits (for benchmarks and troubleshooting; docs/pacing.md).
   */
  pacing: boolean;
  /** POSTYARD_BOUNCE_RULES_FILE: the operator's bounce rules; null = config/bounce-rules.yaml. */
  bounceRulesFile: string | null;
  /** PEM file of CA certificates trusted besides Node's bundled roots (relay, MX and MTA-STS checks). */
  extraCaFile: string | null;
  /** HTTPS port of MTA-STS policy hosts (`mta-sts.<domain>`); 443 except in tests. */
  mtaStsPort: number;
  dnsServers: string[] | null;
  /** Proxies (addresses/CIDRs) whose X-Forwarded-For / -Proto are believed; null = none. */
  trustProxy: string[] | null;
  /** Peers that must open SMTP connections with a PROXY protocol v1 header ('*' = all); null = none. */
  smtpProxyProtocol: string[] | null;
  mxPort: number;
  /**
   * Local addresses outbound SMTP may bind (POSTYARD_SOURCE_ADDRESSES; IP pools draw from these,
   * docs/ip-pools.md). Empty = the host's default route only.
   */
  sourceAddresses: readonly string[];
  devMode: boolean;
  allowPrivateWebhookTargets: boolean;
  /** Deliver to MX hosts on loopback/private addresses (dev mode implies it). */
  allowPrivateMxTargets: boolean;
  smtpAllowInsecureAuth: boolean;
  smtpTlsCert: string | null;
  smtpTlsKey: string | null;
  /** Address the SMTP submission listeners bind to. */
  smtpHost: string;
  /** Inbound listener for bounces and feedback reports (role `inbound`, docs/inbound.md). */
  inboundPort: number;
  inboundHost: string;
  /**
   * Base URL of the public tracking and unsubscribe routes (/o, /c, /u), no trailing slash
   * (POSTYARD_PUBLIC_URL; default http://<http host>:<http port>, fit for development only).
   */
  publicUrl: string;
  /** Tracking requests per client address: token bucket (docs/tracking.md "Rate limits"). */
  trackingRateLimitRps: number;
  trackingRateLimitBurst: number;
  /** SIZE limit of one submitted message (bytes). */
  smtpMaxMessageBytes: number;
  /** RCPT TO commands accepted per message. */
  smtpMaxRecipients: number;
  /** Concurrent SMTP connections per client IP and per SMTP credential. */
  smtpMaxConnectionsPerIp: number;
  smtpMaxConnectionsPerCredential: number;
  /** Messages per SMTP credential per minute (token bucket, burst = the same number); 0 = off. */
  smtpMessagesPerMinute: number;
  /** Seconds without a byte from the client before 421. */
  smtpIdleTimeoutSeconds: number;
  /** Seconds a client may take from one step (AUTH, MAIL, RCPT, end of DATA) to the next. */
  smtpCommandDeadlineSeconds: number;
  rateLimitRps: number;
  rateLimitBurst: number;
  /** All keys of one tenant together (tenants.tenant_rate_limit_* override it); 0 = off. */
  tenantRateLimitRps: number;
  tenantRateLimitBurst: number;
  /** Sending domains per tenant unless tenants.max_sending_domains says otherwise. */
  maxDomainsPerTenant: number;
  /** Failed API-key / SMTP AUTH attempts per client address per 10 minutes (then 429 / 421); 0 = off. */
  authFailuresPerIp: number;
  /** Master key (32 bytes) for secrets at rest; resolved by resolveMasterKey(). */
  masterKey: Buffer | null;
  logLevel: string;
  /** POSTYARD_LOG_FORMAT: `auto` (readable when stdout is a terminal, else JSON), `json` or `pretty`. */
  logFormat: 'auto' | 'json' | 'pretty';
  ehloName: string;
  /**
   * Host name that every sending domain's return-path CNAME (`bounces.<domain>`) points at and
   * that its SPF record includes (docs/domains.md). Default: the EHLO name when it is a host
   * name, else `localhost` (a placeholder fit for development only).
   */
  bounceHost: string;
  redisUrl: string | null;
  idempotencyTtlHours: number;
  eventRetentionDays: number;
  bodyLimitBytes: number;
  importLimitBytes: number;
  /** Seconds an API-key lookup may be cached; the contract caps it at 5. */
  authCacheSeconds: number;
  /** Delivery claim lease: a crashed worker's messages return after this. */
  deliveryLeaseSeconds: number;
  /** Webhook dispatch claim lease: a crashed node's claimed deliveries are retried after this. */
  webhookLeaseSeconds: number;
  /** How often worker nodes try the idempotency purge (one node at a time, under a lease). */
  idempotencyPurgeSeconds: number;
  /** On shutdown, how long in-flight HTTP requests may take before their connections are cut. */
  shutdownGraceSeconds: number;
  /** PostgreSQL connections per process. */
  dbPoolSize: number;
  /** Worker threads that build and DKIM-sign outgoing messages; 0 renders on the main thread. */
  renderThreads: number;
  /** Seconds a client has to send all request headers (slow-drip clients get 408 and are cut). */
  httpHeadersTimeoutSeconds: number;
  /** Seconds a client has to send a whole request, body included (the handler's time is not counted). */
  httpRequestTimeoutSeconds: number;
  /** Seconds an idle keep-alive connection is kept open (above a load balancer's idle timeout). */
  httpKeepAliveTimeoutSeconds: number;
}

type Env = Record<string, string | undefined>;

function str(env: Env, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v.trim() === '' ? undefined : v.trim();
}

function int(env: Env, name: string, def: number, min: number, max: number): number {
  const raw = str(env, name);
  if (raw === undefined) return def;
  if (!/^\d+$/.test(raw)) throw new ConfigError(name, `expected an integer, got "${raw}"`);
  const n = Number(raw);
  if (n < min || n > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${n}`);
  return n;
}

function bool(env: Env, name: string, def: boolean): boolean {
  const raw = str(env, name)?.toLowerCase();
  if (raw === undefined) return def;
  if (['1', 'true', 'yes', 'on'].includes(raw)) return true;
  if (['0', 'false', 'no', 'off'].includes(raw)) return false;
  throw new ConfigError(name, `expected true or false, got "${raw}"`);
}

function defaultEhloName(): string {
  const h = hostname();
  // A bare single-label name is refused by real MTAs; fall back to an address literal.
  return h.includes('.') ? h : '[127.0.0.1]';
}

/** POSTYARD_PUBLIC_URL: an http(s) URL without query or fragment; trailing slashes dropped. */
function publicUrlOf(env: Env): string {
  const raw = str(env, 'POSTYARD_PUBLIC_URL');
  if (raw === undefined) {
    const host = str(env, 'POSTYARD_HTTP_HOST') ?? '127.0.0.1';
    return `http://${host.includes(':') ? `[${host}]` : host}:${int(env, 'POSTYARD_HTTP_PORT', 3000, 0, 65535)}`;
  }
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new ConfigError('POSTYARD_PUBLIC_URL', `"${raw}" is not a URL`);
  }
  if ((u.protocol !== 'https:' && u.protocol !== 'http:') || u.search || u.hash || u.username) {
    throw new ConfigError('POSTYARD_PUBLIC_URL', 'must be an http(s) URL without credentials, query or fragment');
  }
  return u.href.replace(/\/+$/, '');
}

export function loadConfig(env: Env = process.env): Config {
  const databaseUrl = str(env, 'DATABASE_URL') ?? null;
  if (databaseUrl && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError('DATABASE_URL', 'must start with postgres:// or postgresql://');
  }
  const relayUrl = str(env, 'POSTYARD_RELAY_URL') ?? null;
  if (relayUrl && !/^smtps?:\/\/[^/]+/.test(relayUrl)) {
    throw new ConfigError('POSTYARD_RELAY_URL', 'must look like smtp://user:pass@host:port');
  }
  if (relayUrl) {
    try {
      relayFromUrl(relayUrl);
    } catch (err) {
      throw new ConfigError('POSTYARD_RELAY_URL', (err as Error).message);
    }
  }
  const extraCaFile = str(env, 'POSTYARD_EXTRA_CA_FILE') ?? null;
  if (extraCaFile) {
    if (!existsSync(extraCaFile)) throw new ConfigError('POSTYARD_EXTRA_CA_FILE', `file not found: ${extraCaFile}`);
    if (!readFileSync(extraCaFile, 'utf8').includes('-----BEGIN CERTIFICATE-----')) {
      throw new ConfigError('POSTYARD_EXTRA_CA_FILE', `${extraCaFile} holds no PEM certificate`);
    }
  }
  const trustRaw = str(env, 'POSTYARD_TRUST_PROXY');
  const trustProxy = trustRaw
    ? trustRaw
        .split(',')
        .map((x) => x.trim())
        .filter(Boolean)
    : null;
  for (const t of trustProxy ?? []) {
    const [ip, bits, extra] = t.split('/');
    const family = isIP(ip ?? '');
    const max = family === 6 ? 128 : 32;
    if (!family || extra !== undefined || (bits !== undefined && !(/^\d+$/.test(bits) && Number(bits) <= max))) {
      throw new ConfigError('POSTYARD_TRUST_PROXY', `expected IP addresses or CIDR ranges, got "${t}"`);
    }
  }
  const proxyRaw = str(env, 'POSTYARD_SMTP_PROXY_PROTOCOL');
  const smtpProxyProtocol = proxyRaw
    ? proxyRaw
        .split(',')
        .map((x) => x.trim())
        .filter(Boolean)
    : null;
  for (const p of smtpProxyProtocol ?? []) {
    if (p !== '*' && !isIP(p)) {
      throw new ConfigError('POSTYARD_SMTP_PROXY_PROTOCOL', `expected IP addresses or *, got "${p}"`);
    }
  }
  const dnsRaw = str(env, 'POSTYARD_DNS_SERVERS');
  const dnsServers = dnsRaw
    ? dnsRaw
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean)
    : null;
  for (const s of dnsServers ?? []) {
    if (!/^(\[[0-9a-fA-F:]+\]|[0-9.]+|[0-9a-fA-F:]+)(:\d+)?$/.test(s)) {
      throw new ConfigError('POSTYARD_DNS_SERVERS', `"${s}" is not an IP address with optional :port`);
    }
  }
  const sourceAddresses = [
    ...new Set(
      (str(env, 'POSTYARD_SOURCE_ADDRESSES') ?? '')
        .split(',')
        .map((a) => a.trim())
        .filter(Boolean),
    ),
  ];
  for (const a of sourceAddresses) {
    if (!isIP(a)) throw new ConfigError('POSTYARD_SOURCE_ADDRESSES', `"${a}" is not an IPv4 or IPv6 address`);
  }
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
  const masterRaw = str(env, 'POSTYARD_MASTER_KEY');
  let masterKey: Buffer | null = null;
  if (masterRaw) {
    masterKey = decodeMasterKey(masterRaw);
    if (!masterKey) throw new ConfigError('POSTYARD_MASTER_KEY', 'must be 32 bytes as 64 hex chars or base64');
  }
  const logLevel = str(env, 'POSTYARD_LOG_LEVEL') ?? 'info';
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(logLevel)) {
    throw new ConfigError('POSTYARD_LOG_LEVEL', `unknown level "${logLevel}"`);
  }
  const logFormat = str(env, 'POSTYARD_LOG_FORMAT') ?? 'auto';
  if (logFormat !== 'auto' && logFormat !== 'json' && logFormat !== 'pretty') {
    throw new ConfigError('POSTYARD_LOG_FORMAT', `expected auto, json or pretty, got "${logFormat}"`);
  }
  const ehloName = str(env, 'POSTYARD_EHLO_NAME') ?? defaultEhloName();
  if (!ehloName.includes('.') && !ehloName.startsWith('[')) {
    throw new ConfigError(
      'POSTYARD_EHLO_NAME',
      'must be a fully qualified name or an address literal like [192.0.2.1]',
    );
  }
  const bounceHost = (str(env, 'POSTYARD_BOUNCE_HOST') ?? (ehloName.startsWith('[') ? 'localhost' : ehloName))
    .toLowerCase()
    .replace(/\.$/, '');
  if (
    bounceHost !== 'localhost' &&
    !/^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,61}[a-z0-9]$/.test(bounceHost)
  ) {
    throw new ConfigError('POSTYARD_BOUNCE_HOST', `"${bounceHost}" is not a fully qualified host name`);
  }
  const redisUrl = str(env, 'REDIS_URL') ?? null;
  if (redisUrl && !/^rediss?:\/\//.test(redisUrl)) throw new ConfigError('REDIS_URL', 'must start with redis://');
  const dataDirRaw = str(env, 'POSTYARD_DATA_DIR') ?? './data';
  const nodeId = str(env, 'POSTYARD_NODE_ID') ?? null;
  if (nodeId !== null && !NODE_ID_FORMAT.test(nodeId)) {
    throw new ConfigError('POSTYARD_NODE_ID', 'must be 1-64 characters: letters, digits, ".", "_", "-"');
  }
  const nodeHeartbeatSeconds = int(env, 'POSTYARD_NODE_HEARTBEAT_SECONDS', 5, 1, 60);
  const nodeTimeoutSeconds = int(env, 'POSTYARD_NODE_TIMEOUT_SECONDS', 20, 3, 600);
  if (nodeTimeoutSeconds < 2 * nodeHeartbeatSeconds) {
    throw new ConfigError(
      'POSTYARD_NODE_TIMEOUT_SECONDS',
      `must be at least twice POSTYARD_NODE_HEARTBEAT_SECONDS (${nodeHeartbeatSeconds})`,
    );
  }
  const smtpsPort = int(env, 'POSTYARD_SMTPS_PORT', 0, 0, 65535);
  const httpHeadersTimeoutSeconds = int(env, 'POSTYARD_HTTP_HEADERS_TIMEOUT_SECONDS', 30, 1, 3600);
  const httpRequestTimeoutSeconds = int(env, 'POSTYARD_HTTP_REQUEST_TIMEOUT_SECONDS', 300, 1, 86_400);
  if (httpRequestTimeoutSeconds < httpHeadersTimeoutSeconds) {
    // Node refuses a headers timeout above the request timeout.
    throw new ConfigError(
      'POSTYARD_HTTP_REQUEST_TIMEOUT_SECONDS',
      `must be at least POSTYARD_HTTP_HEADERS_TIMEOUT_SECONDS (${httpHeadersTimeoutSeconds})`,
    );
  }

  const publicUrl = publicUrlOf(env);
  return Object.freeze({
    publicUrl,
    trackingRateLimitRps: int(env, 'POSTYARD_TRACKING_RATE_LIMIT_RPS', 100, 1, 10_000_000),
    trackingRateLimitBurst: int(env, 'POSTYARD_TRACKING_RATE_LIMIT_BURST', 500, 1, 100_000_000),
    httpPort: int(env, 'POSTYARD_HTTP_PORT', 3000, 0, 65535),
    httpHost: str(env, 'POSTYARD_HTTP_HOST') ?? '127.0.0.1',
    metricsPort: int(env, 'POSTYARD_METRICS_PORT', 9464, 0, 65535),
    metricsHost: str(env, 'POSTYARD_METRICS_HOST') ?? str(env, 'POSTYARD_HTTP_HOST') ?? '127.0.0.1',
    smtpPort: int(env, 'POSTYARD_SMTP_PORT', 2587, 0, 65535),
    smtpsPort: smtpsPort === 0 ? null : smtpsPort,
    dataDir: isAbsolute(dataDirRaw) ? dataDirRaw : resolve(dataDirRaw),
    nodeId,
    nodeHeartbeatSeconds,
    nodeTimeoutSeconds,
    databaseUrl,
    relayUrl,
    pacingFile: str(env, 'POSTYARD_PACING_FILE') ?? null,
    pacing: bool(env, 'POSTYARD_PACING', true),
    bounceRulesFile: str(env, 'POSTYARD_BOUNCE_RULES_FILE') ?? null,
    extraCaFile,
    mtaStsPort: int(env, 'POSTYARD_MTA_STS_PORT', 443, 1, 65535),
    dnsServers,
    trustProxy,
    smtpProxyProtocol,
    mxPort: int(env, 'POSTYARD_MX_PORT', 25, 1, 65535),
    sourceAddresses: Object.freeze(sourceAddresses),
    devMode: bool(env, 'POSTYARD_DEV_MODE', false),
    allowPrivateWebhookTargets: bool(env, 'POSTYARD_ALLOW_PRIVATE_WEBHOOK_TARGETS', false),
    allowPrivateMxTargets: bool(env, 'POSTYARD_ALLOW_PRIVATE_MX_TARGETS', false),
    smtpAllowInsecureAuth: bool(env, 'POSTYARD_SMTP_ALLOW_INSECURE_AUTH', false),
    smtpTlsCert: cert,
    smtpTlsKey: key,
    smtpHost: str(env, 'POSTYARD_SMTP_HOST') ?? '127.0.0.1',
    inboundPort: int(env, 'POSTYARD_INBOUND_PORT', 2525, 0, 65535),
    inboundHost: str(env, 'POSTYARD_INBOUND_HOST') ?? '127.0.0.1',
    smtpMaxMessageBytes: int(env, 'POSTYARD_SMTP_MAX_MESSAGE_MB', 25, 1, 1024) * 1024 * 1024,
    smtpMaxRecipients: int(env, 'POSTYARD_SMTP_MAX_RECIPIENTS', 1000, 1, 10_000),
    smtpMaxConnectionsPerIp: int(env, 'POSTYARD_SMTP_MAX_CONNECTIONS_PER_IP', 50, 1, 100_000),
    smtpMaxConnectionsPerCredential: int(env, 'POSTYARD_SMTP_MAX_CONNECTIONS_PER_CREDENTIAL', 20, 1, 100_000),
    smtpMessagesPerMinute: int(env, 'POSTYARD_SMTP_MESSAGES_PER_MINUTE', 6000, 0, 10_000_000),
    smtpIdleTimeoutSeconds: int(env, 'POSTYARD_SMTP_IDLE_TIMEOUT_SECONDS', 60, 1, 3600),
    smtpCommandDeadlineSeconds: int(env, 'POSTYARD_SMTP_COMMAND_DEADLINE_SECONDS', 300, 1, 3600),
    rateLimitRps: int(env, 'POSTYARD_RATE_LIMIT_RPS', 100, 0, 1_000_000),
    rateLimitBurst: int(env, 'POSTYARD_RATE_LIMIT_BURST', 200, 0, 10_000_000),
    // Default: two keys' worth, so a tenant may run two senders at full speed but cannot
    // multiply its limit by making keys.
    tenantRateLimitRps: int(
      env,
      'POSTYARD_TENANT_RATE_LIMIT_RPS',
      2 * int(env, 'POSTYARD_RATE_LIMIT_RPS', 100, 0, 1_000_000),
      0,
      2_000_000,
    ),
    tenantRateLimitBurst: int(
      env,
      'POSTYARD_TENANT_RATE_LIMIT_BURST',
      2 * int(env, 'POSTYARD_RATE_LIMIT_BURST', 200, 0, 10_000_000),
      0,
      20_000_000,
    ),
    maxDomainsPerTenant: int(env, 'POSTYARD_MAX_DOMAINS_PER_TENANT', 100, 1, 1_000_000),
    authFailuresPerIp: int(env, 'POSTYARD_AUTH_FAILURES_PER_IP', 60, 0, 1_000_000),
    masterKey,
    logLevel,
    logFormat,
    ehloName,
    bounceHost,
    redisUrl,
    idempotencyTtlHours: int(env, 'POSTYARD_IDEMPOTENCY_TTL_HOURS', 24, 1, 24 * 30),
    eventRetentionDays: int(env, 'POSTYARD_EVENT_RETENTION_DAYS', 30, 1, 3650),
    bodyLimitBytes: int(env, 'POSTYARD_BODY_LIMIT_MB', 10, 1, 1024) * 1024 * 1024,
    importLimitBytes: int(env, 'POSTYARD_IMPORT_LIMIT_MB', 100, 1, 10240) * 1024 * 1024,
    authCacheSeconds: int(env, 'POSTYARD_AUTH_CACHE_SECONDS', 2, 0, 5),
    deliveryLeaseSeconds: int(env, 'POSTYARD_DELIVERY_LEASE_SECONDS', 300, 5, 3600),
    // Above the 10 s webhook POST timeout plus an outcome flush, so a live node keeps its claims.
    webhookLeaseSeconds: int(env, 'POSTYARD_WEBHOOK_LEASE_SECONDS', 120, 15, 3600),
    idempotencyPurgeSeconds: int(env, 'POSTYARD_IDEMPOTENCY_PURGE_SECONDS', 60, 1, 86_400),
    shutdownGraceSeconds: int(env, 'POSTYARD_SHUTDOWN_GRACE_SECONDS', 8, 0, 60),
    dbPoolSize: int(env, 'POSTYARD_DB_POOL_SIZE', 10, 1, 500),
    // Default: one thread per core beyond the main thread (at least 1, at most 4).
    renderThreads: int(env, 'POSTYARD_RENDER_THREADS', Math.max(1, Math.min(4, availableParallelism() - 1)), 0, 32),
    httpHeadersTimeoutSeconds,
    httpRequestTimeoutSeconds,
    httpKeepAliveTimeoutSeconds: int(env, 'POSTYARD_HTTP_KEEP_ALIVE_TIMEOUT_SECONDS', 72, 1, 3600),
  });
}

function decodeMasterKey(raw: string): Buffer | null {
  if (/^[0-9a-fA-F]{64}$/.test(raw)) return Buffer.from(raw, 'hex');
  const b = Buffer.from(raw, 'base64');
  return b.length === 32 ? b : null;
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
