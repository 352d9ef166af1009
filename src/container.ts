import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { type Config, resolveMasterKey } from './config.ts';
import { type Database, migrateToLatest, openDatabase } from './db/index.ts';
import { isPostgres } from './db/dialect.ts';
import { GroupCommit } from './db/group-commit.ts';
import { hmacSha256 } from './lib/crypto.ts';
import { type NodeSelf, nodeSelf, resolveNodeId } from './lib/node-identity.ts';
import { CursorCodec } from './lib/pagination.ts';
import { createMetricsRegistry } from './metrics/registry.ts';
import { ApiKeysService } from './modules/api-keys/api-keys.service.ts';
import { DomainsService } from './modules/domains/domains.service.ts';
import { createSenderPolicy } from './modules/domains/sender-policy.ts';
import { IdempotencyService } from './idempotency/idempotency.service.ts';
import { EventsService } from './modules/events/events.service.ts';
import { WebhookRegistry } from './modules/webhooks/registry.ts';
import { WebhookSender } from './modules/webhooks/sender.ts';
import { WebhooksService } from './modules/webhooks/webhooks.service.ts';
import { FailedAuthLimiter } from './rate-limit/failed-auth.ts';
import { DatabaseStore, MemoryStore, RateLimiter, type RateLimitStore, RedisStore } from './rate-limit/rate-limiter.ts';
import { SuppressionsService } from './modules/suppressions/suppressions.service.ts';
import { SmtpCredentialsService } from './modules/smtp-credentials/smtp-credentials.service.ts';
import { TransmissionsService } from './modules/transmissions/transmissions.service.ts';
import { TenantsService } from './modules/tenants/tenants.service.ts';
import { TemplatesService } from './modules/templates/templates.service.ts';
import { DashboardAccounts, DEFAULT_DASHBOARD_SETTINGS } from './modules/dashboard/accounts.service.ts';
import { signInBudgets } from './modules/dashboard/sign-in-limits.ts';
import { TrustedDevices } from './modules/dashboard/trusted-device.ts';
import { IpPoolsService } from './modules/ip-pools/ip-pools.service.ts';
import { SourceAddresses } from './modules/ip-pools/source-addresses.ts';
import { WarmupPoliciesService } from './modules/warmup/warmup.service.ts';
import { loadPacingData } from './modules/pacing/pacing-data.ts';
import { loadBounceRules, installBounceRules } from './modules/outcomes/bounce-rules.ts';
import { PacingService } from './modules/pacing/pacing.service.ts';
import { FeedbackService } from './modules/feedback/feedback.service.ts';
import { VerpSigner } from './modules/outcomes/verp.ts';
import { TrackingService } from './modules/tracking/tracking.service.ts';
import { DatabaseLedger, MemoryLedger } from './modules/pacing/ledger.ts';
import { type ConnectionSlots, DatabaseSlots, LocalSlots } from './modules/pacing/connection-slots.ts';

/**
 * The node's shared services, built from config as plain factories (no DI framework): the one
 * place that knows them all. Route modules and engines each declare the narrow part they use
 * (their `...Deps` types), which this object satisfies; what belongs to one role (the delivery
 * worker, the webhook dispatcher, the listeners) is built by that role's engine from it. Tests
 * build one per database; the CLI builds one per command.
 */
export interface Container {
  config: Config;
  logger: Logger;
  /** Who this process is: its node id (survives restarts) and this run's claim holder id. */
  node: NodeSelf;
  database: Database;
  /** Shared transactions for the hot accept path (SQLite group commit). */
  groupCommit: GroupCommit;
  masterKey: Buffer;
  cursors: CursorCodec;
  metrics: Registry;
  rateLimiter: RateLimiter;
  /** Failed API-key and SMTP AUTH attempts per client address (brute-force brake). */
  failedAuth: FailedAuthLimiter;
  redis: Redis | null;
  apiKeys: ApiKeysService;
  tenants: TenantsService;
  smtpCredentials: SmtpCredentialsService;
  idempotency: IdempotencyService;
  suppressions: SuppressionsService;
  transmissions: TransmissionsService;
  events: EventsService;
  webhooks: WebhooksService;
  domains: DomainsService;
  /** Stored templates (docs/templates.md). */
  templates: TemplatesService;
  /** IP pools and warmup policies (docs/ip-pools.md). */
  ipPools: IpPoolsService;
  /** The operator's source addresses: shared or dedicated, and their warmup (docs/ip-pools.md). */
  sourceAddresses: SourceAddresses;
  warmupPolicies: WarmupPoliciesService;
  /** Site limits, overrides, automation rules and their grants (docs/pacing.md). */
  pacing: PacingService;
  /**
   * A delivery worker's connection slots (docs/pacing.md "Connections across nodes"): leases in
   * the database where nodes share it, counts in memory where one node owns it.
   */
  connectionSlots(holder: string): ConnectionSlots;
  /** Dashboard users, sign-in and sessions (the web portal). */
  dashboard: DashboardAccounts;
  /** Opens, clicks and unsubscribes: the tracking routes and the mailto unsubscribe address. */
  tracking: TrackingService;
  /** What DSNs and ARF reports to the inbound listener do to our messages (docs/inbound.md). */
  feedback: FeedbackService;
  /** Periodic background chores of this node; started by roles, stopped by close(). */
  timers: Set<NodeJS.Timeout>;
  close(): Promise<void>;
}

export interface ContainerOptions {
  /** PostgreSQL schema to use (tests). */
  pgSchema?: string;
  /** Run migrations before returning. Default true. */
  migrate?: boolean;
}

export async function createContainer(config: Config, logger: Logger, opts: ContainerOptions = {}): Promise<Container> {
  const masterKey = resolveMasterKey(config);
  const node = nodeSelf(resolveNodeId(config.nodeId, config.dataDir));
  const database = openDatabase({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    poolSize: config.dbPoolSize,
    sqliteSynchronous: config.sqliteSynchronous,
    sqliteCacheMb: config.sqliteCacheMb,
    ...(opts.pgSchema ? { pgSchema: opts.pgSchema } : {}),
  });
  if (opts.migrate !== false) await migrateToLatest(database);

  const cursors = new CursorCodec(hmacSha256(masterKey, 'postyard:cursor-signing'));
  // ioredis is loaded only when Redis is configured: a start without it does not pay for it.
  const redis = config.redisUrl
    ? new (await import('ioredis')).Redis(config.redisUrl, { lazyConnect: false, maxRetriesPerRequest: 2 })
    : null;
  redis?.on('error', (err) => logger.warn({ err: err.message }, 'redis error'));
  const store: RateLimitStore = redis
    ? new RedisStore(redis)
    : isPostgres(database)
      ? new DatabaseStore(database)
      : new MemoryStore();

  const apiKeys = new ApiKeysService(database.db, cursors, config.authCacheSeconds);
  const timers = new Set<NodeJS.Timeout>();
  const suppressions = new SuppressionsService(database, cursors);
  // Private webhook targets: operator opt-in or development mode (docs/webhooks.md "Security").
  const allowPrivateTargets = config.allowPrivateWebhookTargets || config.devMode;
  const webhooks = new WebhooksService(
    database,
    cursors,
    masterKey,
    new WebhookRegistry(database.db, masterKey),
    new WebhookSender({ allowPrivate: allowPrivateTargets }),
    { allowPrivateTargets },
  );
  const domains = new DomainsService(database.db, cursors, masterKey, config);
  const rateLimiter = new RateLimiter(store);
  const sourceAddresses = new SourceAddresses(database, config);
  const ipPools = new IpPoolsService(database, cursors, sourceAddresses);
  // The operator's bounce rules replace the shipped table; read at start like the pacing file.
  if (config.bounceRulesFile) installBounceRules(loadBounceRules(config.bounceRulesFile));
  // PostgreSQL: half the pool for batches of accepts at most (4), the rest for idempotency
  // claims, reads and the workers (docs/operations.md, pool sizing).
  const groupCommit = new GroupCommit(database, { lanes: Math.max(1, Math.min(4, Math.floor(config.dbPoolSize / 2))) });
  const container: Container = {
    config,
    logger,
    node,
    database,
    groupCommit,
    masterKey,
    cursors,
    metrics: createMetricsRegistry(database),
    rateLimiter,
    failedAuth: new FailedAuthLimiter(rateLimiter, config.authFailuresPerIp),
    redis,
    apiKeys,
    tenants: new TenantsService(database, apiKeys),
    smtpCredentials: new SmtpCredentialsService(database.db, cursors),
    idempotency: new IdempotencyService(database, config.idempotencyTtlHours, node.holder),
    suppressions,
    transmissions: new TransmissionsService(
      database.db,
      suppressions,
      createSenderPolicy(config, domains.verifiedCache),
      (db, tenantId, ref) => ipPools.resolve(db, tenantId, ref),
    ),
    domains,
    templates: new TemplatesService(database, cursors),
    ipPools,
    sourceAddresses,
    warmupPolicies: new WarmupPoliciesService(database, cursors),
    // The operator's file is read here, at start: a broken one stops the start with its reason.
    // Grants live in memory where one node owns the database (SQLite), in it where nodes share it.
    pacing: new PacingService(
      database,
      loadPacingData(config.pacingFile),
      logger,
      isPostgres(database) ? new DatabaseLedger(database) : new MemoryLedger(),
    ),
    events: new EventsService(database, cursors),
    connectionSlots: (holder) =>
      isPostgres(database) ? new DatabaseSlots(database, holder, logger) : new LocalSlots(),
    webhooks,
    dashboard: new DashboardAccounts(database.db, rateLimiter, new TrustedDevices(masterKey), {
      ...DEFAULT_DASHBOARD_SETTINGS,
      signIn: signInBudgets(config.signInFailuresPerAccount),
    }),
    tracking: new TrackingService(groupCommit, suppressions),
    feedback: new FeedbackService(
      groupCommit,
      suppressions,
      new VerpSigner(masterKey),
      logger.child({ component: 'inbound' }),
    ),
    timers,
    async close() {
      for (const t of timers) clearInterval(t);
      timers.clear();
      container.pacing.stop();
      await apiKeys.flushLastUsed().catch(() => {});
      await webhooks.close();
      redis?.disconnect();
      await database.close();
    },
  };
  return container;
}
