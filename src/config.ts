import { availableParallelism } from 'node:os';
import { isAbsolute, resolve } from 'node:path';
import { NODE_ID_FORMAT } from './lib/node-identity.ts';
import { bool, ConfigError, type Env, int, str } from './config/env.ts';
import {
  bounceHostOf,
  databaseUrlOf,
  dnsServersOf,
  ehloNameOf,
  publicUrlOf,
  redisUrlOf,
  relayUrlOf,
  smtpProxyProtocolOf,
  sourceAddressesOf,
  sourceDedicationsOf,
  trustProxyOf,
} from './config/network.ts';
import { extraCaFileOf, masterKeyOf, smtpTlsFilesOf } from './config/secrets.ts';
import { type Config, DEFAULT_DELIVERY_CLAIM_BATCH } from './config/schema.ts';

/**
 * Environment -> validated, typed, frozen config. Nothing else in the code reads process.env.
 * A bad value throws ConfigError naming the variable; the CLI prints that one line and exits 1.
 *
 * This file is the one entry point (every caller imports from here); the parts live in
 * config/: env.ts (reading one variable), schema.ts (the Config type, per area), network.ts
 * (addresses, hosts, URLs), secrets.ts (keys and certificate files, resolveMasterKey).
 */
export { ConfigError, type Env } from './config/env.ts';
export {
  ALL_ROLES,
  type Config,
  type HttpConfig,
  type LimitsConfig,
  type NodeConfig,
  type OutboundConfig,
  type Role,
  type SmtpConfig,
} from './config/schema.ts';
export { resolveMasterKey } from './config/secrets.ts';

/** Log levels pino knows, plus silent. */
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export function loadConfig(env: Env = process.env): Config {
  // Checked in this order, before the plain numbers below, so that with several bad values
  // the first error reported stays the one it always was.
  const databaseUrl = databaseUrlOf(env);
  const relayUrl = relayUrlOf(env);
  const extraCaFile = extraCaFileOf(env);
  const trustProxy = trustProxyOf(env);
  const smtpProxyProtocol = smtpProxyProtocolOf(env);
  const dnsServers = dnsServersOf(env);
  const sourceAddresses = sourceAddressesOf(env);
  const sourceDedications = sourceDedicationsOf(env);
  const { cert, key } = smtpTlsFilesOf(env);
  const masterKey = masterKeyOf(env);
  const logLevel = str(env, 'POSTYARD_LOG_LEVEL') ?? 'info';
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError('POSTYARD_LOG_LEVEL', `unknown level "${logLevel}"`);
  }
  const sqliteSynchronous = (str(env, 'POSTYARD_SQLITE_SYNCHRONOUS') ?? 'normal').toLowerCase();
  if (sqliteSynchronous !== 'normal' && sqliteSynchronous !== 'full') {
    throw new ConfigError('POSTYARD_SQLITE_SYNCHRONOUS', `expected normal or full, got "${sqliteSynchronous}"`);
  }
  const logFormat = str(env, 'POSTYARD_LOG_FORMAT') ?? 'auto';
  if (logFormat !== 'auto' && logFormat !== 'json' && logFormat !== 'pretty') {
    throw new ConfigError('POSTYARD_LOG_FORMAT', `expected auto, json or pretty, got "${logFormat}"`);
  }
  const ehloName = ehloNameOf(env);
  const bounceHost = bounceHostOf(env, ehloName);
  const redisUrl = redisUrlOf(env);
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
    sourceDedications: Object.freeze(sourceDedications),
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
    signInFailuresPerAccount: int(env, 'POSTYARD_SIGNIN_FAILURES_PER_ACCOUNT', 10, 1, 1000),
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
    deliveryClaimBatch: int(env, 'POSTYARD_DELIVERY_CLAIM_BATCH', DEFAULT_DELIVERY_CLAIM_BATCH, 1, 1000),
    // Above the 10 s webhook POST timeout plus an outcome flush, so a live node keeps its claims.
    webhookLeaseSeconds: int(env, 'POSTYARD_WEBHOOK_LEASE_SECONDS', 120, 15, 3600),
    idempotencyPurgeSeconds: int(env, 'POSTYARD_IDEMPOTENCY_PURGE_SECONDS', 60, 1, 86_400),
    shutdownGraceSeconds: int(env, 'POSTYARD_SHUTDOWN_GRACE_SECONDS', 8, 0, 60),
    dbPoolSize: int(env, 'POSTYARD_DB_POOL_SIZE', 10, 1, 500),
    sqliteSynchronous,
    sqliteCacheMb: int(env, 'POSTYARD_SQLITE_CACHE_MB', 64, 2, 65_536),
    // Default: one thread per core beyond the main thread (at least 1, at most 4).
    renderThreads: int(env, 'POSTYARD_RENDER_THREADS', Math.max(1, Math.min(4, availableParallelism() - 1)), 0, 32),
    httpHeadersTimeoutSeconds,
    httpRequestTimeoutSeconds,
    httpKeepAliveTimeoutSeconds: int(env, 'POSTYARD_HTTP_KEEP_ALIVE_TIMEOUT_SECONDS', 72, 1, 3600),
  });
}
