/**
 * The shape of the validated config, one interface per area so a reader finds a setting next
 * to the ones it works with. `Config` is all of them; loadConfig (../config.ts) builds it.
 * Field comments name the variable where its name is not plain from the field's.
 */

export type Role = 'api' | 'smtp' | 'worker' | 'inbound';
export const ALL_ROLES: readonly Role[] = ['api', 'smtp', 'worker', 'inbound'];

/**
 * Most messages one delivery claim takes by default (POSTYARD_DELIVERY_CLAIM_BATCH). 50, not 200:
 * on SQLite a claim runs on the event loop, and with 1,000,000 queued across 1,000 tenants claims
 * of 50 measured a p99 of 3.5 ms where claims of 200 measured 5.3-9.7 ms (the fair-claim target
 * was 5 ms), at the same delivery rate with one tenant or 1,000 (docs/benchmarks.md "Session 14").
 */
export const DEFAULT_DELIVERY_CLAIM_BATCH = 50;

/** This node, its storage and its background housekeeping. */
export interface NodeConfig {
  dataDir: string;
  /** This node's id (POSTYARD_NODE_ID); null = the one kept in <dataDir>/node-id. */
  nodeId: string | null;
  /** How often a node writes its heartbeat and checks the others'. */
  nodeHeartbeatSeconds: number;
  /** A node whose heartbeat stays unchanged this long is dead: its claims are taken over. */
  nodeTimeoutSeconds: number;
  /** postgres://... or null for SQLite in dataDir. */
  databaseUrl: string | null;
  /** PostgreSQL connections per process. */
  dbPoolSize: number;
  /**
   * SQLite's `synchronous` (POSTYARD_SQLITE_SYNCHRONOUS): `normal` (default) survives a crash of
   * the process (kill -9) but not of the machine; `full` flushes the WAL at every commit, so
   * accepted mail also survives power loss, as PostgreSQL's default commit does.
   */
  sqliteSynchronous: 'normal' | 'full';
  /**
   * SQLite's page cache of the main connection in MiB (POSTYARD_SQLITE_CACHE_MB, default 64).
   * SQLite's own default (2 MB) is sized for embedded use: once the indexes outgrow it every
   * insert reads its B-tree pages back from the OS on the event loop's thread.
   */
  sqliteCacheMb: number;
  redisUrl: string | null;
  /** Master key (32 bytes) for secrets at rest; resolved by resolveMasterKey(). */
  masterKey: Buffer | null;
  devMode: boolean;
  logLevel: string;
  /** POSTYARD_LOG_FORMAT: `auto` (readable when stdout is a terminal, else JSON), `json` or `pretty`. */
  logFormat: 'auto' | 'json' | 'pretty';
  idempotencyTtlHours: number;
  /** How often worker nodes try the idempotency purge (one node at a time, under a lease). */
  idempotencyPurgeSeconds: number;
  eventRetentionDays: number;
  /** On shutdown, how long in-flight HTTP requests may take before their connections are cut. */
  shutdownGraceSeconds: number;
}

/** The HTTP API listener, the metrics listener and the public (tracking) URL. */
export interface HttpConfig {
  httpPort: number;
  httpHost: string;
  /**
   * `/metrics` listener of a node without the api role (POSTYARD_METRICS_PORT, default 9464;
   * POSTYARD_METRICS_HOST, default the HTTP host). With the api role /metrics is on the API port.
   */
  metricsPort: number;
  metricsHost: string;
  /** Proxies (addresses/CIDRs) whose X-Forwarded-For / -Proto are believed; null = none. */
  trustProxy: string[] | null;
  /**
   * Base URL of the public tracking and unsubscribe routes (/o, /c, /u), no trailing slash
   * (POSTYARD_PUBLIC_URL; default http://<http host>:<http port>, fit for development only).
   */
  publicUrl: string;
  bodyLimitBytes: number;
  importLimitBytes: number;
  /** Seconds a client has to send all request headers (slow-drip clients get 408 and are cut). */
  httpHeadersTimeoutSeconds: number;
  /** Seconds a client has to send a whole request, body included (the handler's time is not counted). */
  httpRequestTimeoutSeconds: number;
  /** Seconds an idle keep-alive connection is kept open (above a load balancer's idle timeout). */
  httpKeepAliveTimeoutSeconds: number;
}

/** Per-client, per-key and per-tenant limits of the API and the public routes. */
export interface LimitsConfig {
  rateLimitRps: number;
  rateLimitBurst: number;
  /** All keys of one tenant together (tenants.tenant_rate_limit_* override it); 0 = off. */
  tenantRateLimitRps: number;
  tenantRateLimitBurst: number;
  /** Tracking requests per client address: token bucket (docs/tracking.md "Rate limits"). */
  trackingRateLimitRps: number;
  trackingRateLimitBurst: number;
  /** Sending domains per tenant unless tenants.max_sending_domains says otherwise. */
  maxDomainsPerTenant: number;
  /** Failed API-key / SMTP AUTH attempts per client address per 10 minutes (then 429 / 421); 0 = off. */
  authFailuresPerIp: number;
  /** Failed dashboard sign-ins per account per 15 minutes, all addresses together (then locked but for trusted devices). */
  signInFailuresPerAccount: number;
  /** Seconds an API-key lookup may be cached; the contract caps it at 5. */
  authCacheSeconds: number;
}

/** SMTP submission (roles smtp) and the inbound listener (role inbound). */
export interface SmtpConfig {
  smtpPort: number;
  /** Implicit-TLS submission port; null = off. */
  smtpsPort: number | null;
  /** Address the SMTP submission listeners bind to. */
  smtpHost: string;
  /** Peers that must open SMTP connections with a PROXY protocol v1 header ('*' = all); null = none. */
  smtpProxyProtocol: string[] | null;
  smtpAllowInsecureAuth: boolean;
  smtpTlsCert: string | null;
  smtpTlsKey: string | null;
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
  /** Inbound listener for bounces and feedback reports (role `inbound`, docs/inbound.md). */
  inboundPort: number;
  inboundHost: string;
}

/** Outbound traffic: mail to MX hosts or a relay, and webhook POSTs. */
export interface OutboundConfig {
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
  mxPort: number;
  /**
   * Local addresses outbound SMTP may bind (POSTYARD_SOURCE_ADDRESSES; IP pools draw from these,
   * docs/ip-pools.md). Empty = the host's default route only.
   */
  sourceAddresses: readonly string[];
  /**
   * Addresses POSTYARD_SOURCE_ADDRESSES dedicates to a tenant (`address=tenant-id`): address ->
   * tenant id. They override the `postyard addresses` commands, which refuse to change them.
   */
  sourceDedications: Readonly<Record<string, string>>;
  /** Deliver to MX hosts on loopback/private addresses (dev mode implies it). */
  allowPrivateMxTargets: boolean;
  allowPrivateWebhookTargets: boolean;
  ehloName: string;
  /**
   * Host name that every sending domain's return-path CNAME (`bounces.<domain>`) points at and
   * that its SPF record includes (docs/domains.md). Default: the EHLO name when it is a host
   * name, else `localhost` (a placeholder fit for development only).
   */
  bounceHost: string;
  /** Delivery claim lease: a crashed worker's messages return after this. */
  deliveryLeaseSeconds: number;
  /**
   * Most messages one delivery claim takes (POSTYARD_DELIVERY_CLAIM_BATCH, default 50:
   * DEFAULT_DELIVERY_CLAIM_BATCH). On SQLite a claim runs on the event loop: smaller claims hold it
   * for less, at more claim work per message (docs/pacing.md "What a fair claim costs").
   */
  deliveryClaimBatch: number;
  /** Webhook dispatch claim lease: a crashed node's claimed deliveries are retried after this. */
  webhookLeaseSeconds: number;
  /** Worker threads that build and DKIM-sign outgoing messages; 0 renders on the main thread. */
  renderThreads: number;
}

export interface Config extends NodeConfig, HttpConfig, LimitsConfig, SmtpConfig, OutboundConfig {}
