import type { MessageState } from './message-state.ts';

/**
 * Kysely table types. Both backends store the same shapes: ids are UUID text, timestamps are
 * ISO-8601 UTC text (fixed width, so they sort correctly as text), JSON is serialized text and
 * booleans are 0/1 integers. That keeps one set of queries valid on SQLite and PostgreSQL.
 * Every tenant-owned table carries tenant_id and its indexes lead with it (see docs/ARCHITECTURE.md).
 */
import type { Generated } from 'kysely';

export interface TenantsTable {
  id: string;
  name: string;
  default_from: string | null;
  rate_limit_rps: number | null;
  rate_limit_burst: number | null;
  /** Requests/s and burst for all of the tenant's keys together; null = the configured default (migration 010). */
  tenant_rate_limit_rps?: number | null;
  tenant_rate_limit_burst?: number | null;
  /** Cap on sending domains; null = POSTYARD_MAX_DOMAINS_PER_TENANT (migration 008). */
  max_sending_domains?: number | null;
  /** Tracking defaults per mail type as JSON; null = built-in (migration 012, docs/tracking.md). */
  tracking_settings?: string | null;
  created_at: string;
}

export interface ApiKeysTable {
  tenant_id: string;
  id: string;
  name: string;
  key_prefix: string;
  key_hash: string;
  scopes: string;
  created_at: string;
  last_used_at: string | null;
  deleted_at: string | null;
}

export interface SmtpCredentialsTable {
  tenant_id: string;
  id: string;
  name: string;
  username: string;
  password_hash: string;
  created_at: string;
  last_used_at: string | null;
  deleted_at: string | null;
}

export interface IdempotencyKeysTable {
  tenant_id: string;
  /** "POST /v1/transmissions": a key is scoped to tenant + method + path. */
  scope: string;
  key: string;
  fingerprint: string;
  state: 'in_progress' | 'completed';
  response_status: number | null;
  response_body: string | null;
  locked_until: string;
  /** Which run of a node (NodeSelf.holder) holds an in_progress claim (migration 007). */
  locked_by: string | null;
  created_at: string;
  expires_at: string;
}

export interface SuppressionsTable {
  tenant_id: string;
  id: string;
  identifier: string;
  type: string;
  reason_category: string;
  description: string | null;
  source: string;
  /** `all` or `marketing` (migration 012; rows written before it read as `all`). */
  scope?: string;
  created_at: string;
  updated_at: string;
}

export interface TransmissionsTable {
  tenant_id: string;
  id: string;
  source: 'api' | 'smtp';
  mail_type: string;
  tags: string;
  metadata: string;
  /** JSON: from, reply_to, subject, text, html, headers, attachments, template_id. */
  content: string;
  /** Raw RFC 5322 message for SMTP submissions (base64), else null. */
  raw_message: string | null;
  options: string;
  total_accepted: number;
  total_rejected: number;
  start_time: string | null;
  created_at: string;
}

export interface MessagesTable {
  tenant_id: string;
  id: string;
  transmission_id: string;
  recipient: string;
  recipient_name: string | null;
  recipient_domain: string;
  substitution_data: string | null;
  metadata: string | null;
  state: MessageState;
  attempt_count: number;
  next_attempt_at: string;
  locked_until: string | null;
  locked_by: string | null;
  last_response: string | null;
  created_at: string;
  updated_at: string;
  /** 0 transactional, 1 marketing (migration 015): the fair claim's order. Defaults to 0. */
  priority?: number;
  /** The source address of the first attempt (migration 014); retries keep it. */
  source_address?: string | null;
  /**
   * How a group message addressed this recipient (`to`, `cc`, `bcc`; migration 023); null for
   * a message that is not part of a group message.
   */
  recipient_role?: 'to' | 'cc' | 'bcc' | null;
}

export interface DeliveryAttemptsTable {
  tenant_id: string;
  id: string;
  message_id: string;
  attempt: number;
  started_at: string;
  finished_at: string;
  mx_host: string | null;
  address: string | null;
  tls: number;
  /** 1 verified, 0 not verified, null without TLS (migration 006). */
  tls_verified?: number | null;
  /** MTA-STS policy mode of the recipient domain at the attempt; null = none (migration 006). */
  mta_sts?: string | null;
  outcome: string;
  smtp_code: number | null;
  enhanced_code: string | null;
  response: string | null;
  transcript: string | null;
}

export interface EventsTable {
  tenant_id: string;
  id: string;
  type: string;
  created_at: string;
  transmission_id: string | null;
  message_id: string | null;
  recipient: string | null;
  mail_type: string | null;
  tags: string;
  metadata: string;
  data: string;
  /** The recipient's role when the message is part of a group message (migration 023), else null. */
  role?: string | null;
}

export interface WebhooksTable {
  tenant_id: string;
  id: string;
  name: string;
  url: string;
  /** JSON array of event types, or ["*"]. */
  events: string;
  dispatch_policy: 'single' | 'batch';
  batch_max_size: number;
  batch_max_wait_ms: number;
  enabled: number;
  status: 'active' | 'disabled';
  disabled_reason: string | null;
  secret_enc: string;
  previous_secret_enc: string | null;
  previous_secret_expires_at: string | null;
  failing_since: string | null;
  last_success_at: string | null;
  last_failure_at: string | null;
  created_at: string;
  updated_at: string;
}

export interface WebhookOutboxTable {
  event_id: string;
  tenant_id: string;
}

export interface WebhookQueueTable {
  webhook_id: string;
  id: string;
  tenant_id: string;
  /** JSON array of the unit's event ids. */
  event_ids: string;
  event_count: number;
  oldest_event_at: string;
  attempts: number;
  next_attempt_at: string;
  locked_until: string | null;
  locked_by: string | null;
  created_at: string;
}

export interface WebhookDeliveriesTable {
  tenant_id: string;
  id: string;
  webhook_id: string;
  created_at: string;
  batch_id: string | null;
  /** JSON array of the event ids the attempt carried. */
  event_ids: string;
  attempt: number;
  outcome: 'delivered' | 'retrying' | 'failed';
  status_code: number | null;
  duration_ms: number;
  error: string | null;
  next_attempt_at: string | null;
  test: number;
}

export interface EventTagsTable {
  tenant_id: string;
  tag: string;
  event_id: string;
}

export interface SendingDomainsTable {
  tenant_id: string;
  id: string;
  /** Lower-case ASCII (punycode) name. Unique per tenant; at most one tenant holds it verified. */
  domain: string;
  status: 'pending' | 'verified' | 'failed';
  dkim_selector: string;
  /** PKCS#8 PEM sealed with the master key (lib/crypto encryptSecret); never stored in clear. */
  dkim_private_key: string;
  /** Base64 DER SubjectPublicKeyInfo: the p= of the DKIM record. */
  dkim_public_key: string;
  return_path_domain: string;
  /** JSON array of the DNS records to publish, each with its status and last check. */
  records: string;
  /** Why the domain is not verified (a sentence), null when verified or never checked. */
  status_reason: string | null;
  verified_at: string | null;
  created_at: string;
  updated_at: string;
}

/** One row per running process, with its heartbeat (src/jobs/node-registry.ts, migration 007). */
export interface NodesTable {
  /** The run's holder id, `<node id>:<pid>:<random>`: what its claims record as locked_by. */
  id: string;
  node_id: string;
  host: string;
  pid: number;
  started_at: string;
  heartbeat_at: string;
}

export interface LeasesTable {
  name: string;
  holder: string;
  locked_until: string;
}

export interface RateLimitBucketsTable {
  key: string;
  tokens: number;
  updated_ms: number;
  last_allowed: number;
}

export interface DashboardUsersTable {
  tenant_id: string;
  id: string;
  /** Lower-cased; unique across tenants (it alone picks the account at sign-in). */
  email: string;
  /** scrypt (lib/crypto.ts); null until a user invited by a one-time link sets a password. */
  password_hash: string | null;
  created_at: string;
  updated_at: string;
  last_login_at: string | null;
}

export interface DashboardSessionsTable {
  /** SHA-256 hex of the session token in the cookie. */
  id: string;
  tenant_id: string;
  user_id: string;
  csrf_token: string;
  via_link: number;
  created_at: string;
  last_seen_at: string;
  expires_at: string;
}

export interface DashboardLoginLinksTable {
  /** SHA-256 hex of the link's token. */
  id: string;
  tenant_id: string;
  user_id: string;
  created_at: string;
  expires_at: string;
  used_at: string | null;
}

export interface MigrationMarker {
  id: Generated<number>;
}

export interface TemplatesTable {
  tenant_id: string;
  id: string;
  name: string;
  description: string | null;
  published_version: number | null;
  draft_version: number;
  created_at: string;
  updated_at: string;
}

/** One saved version of a template: never changed once written. headers/defaults: JSON text. */
export interface TemplateVersionsTable {
  tenant_id: string;
  template_id: string;
  version: number;
  subject: string;
  text: string | null;
  html: string | null;
  from: string | null;
  reply_to: string | null;
  headers: string;
  defaults: string;
  created_at: string;
}

/** IP pools and warmup (migration 014, docs/ip-pools.md). mail_types/stages: JSON text. */
export interface IpPoolsTable {
  tenant_id: string;
  id: string;
  name: string;
  overflow_pool_id: string | null;
  is_default: number;
  mail_types: string;
  created_at: string;
  updated_at: string;
}

export interface IpPoolAddressesTable {
  tenant_id: string;
  pool_id: string;
  address: string;
  weight: number;
  warmup_policy_id: string | null;
  position: number;
}

export interface WarmupPoliciesTable {
  tenant_id: string;
  id: string;
  name: string;
  stages: string;
  max_bounce_rate: number;
  max_complaint_rate: number;
  created_at: string;
  updated_at: string;
}

export interface WarmupCountersTable {
  address: string;
  period: string;
  sent: number;
  bounced: number;
  complained: number;
}

export interface WarmupProgressTable {
  address: string;
  warmup_day: number;
  day: string;
}

/**
 * The operator's word on a source address (migration 021, docs/ip-pools.md "For the operator"):
 * tenant_id null = shared, else dedicated to that tenant; warmup_stages (JSON stages) with the two
 * rates = the operator's warmup schedule, null = none. An address without a row is shared.
 */
export interface SourceAddressesTable {
  address: string;
  tenant_id: string | null;
  warmup_stages: string | null;
  max_bounce_rate: number | null;
  max_complaint_rate: number | null;
  updated_at: string;
}

/** One row (id 1): bumped by every change to where mail leaves from (migration 021). */
export interface RoutingGenerationTable {
  id: number;
  generation: number;
}

/** Pacing (migration 015, docs/pacing.md). Null limits: the shipped default. */
export interface PacingSiteOverridesTable {
  tenant_id: string;
  site: string;
  max_connections: number | null;
  messages_per_connection: number | null;
  messages_per_minute: number | null;
  messages_per_hour: number | null;
  updated_at: string;
}

/** A site x source address ('' = default route) suspended or slowed by an automation rule. */
export interface PacingSuspensionsTable {
  site: string;
  source_address: string;
  action: string;
  factor: number;
  rule: string;
  reason: string;
  started_at: string;
  until: string;
}

/** Messages granted per pacing bucket and time slot, shared by every PostgreSQL node. */
export interface PacingCountsTable {
  bucket: string;
  slot: number;
  n: number;
}

/** Leased SMTP session slots per pacing bucket, shared by every PostgreSQL node (migration 019). */
export interface PacingConnectionSlotsTable {
  bucket: string;
  slot: number;
  holder: string;
  node: string;
  expires_at: number;
}

export interface DB {
  tenants: TenantsTable;
  api_keys: ApiKeysTable;
  smtp_credentials: SmtpCredentialsTable;
  idempotency_keys: IdempotencyKeysTable;
  suppressions: SuppressionsTable;
  transmissions: TransmissionsTable;
  messages: MessagesTable;
  delivery_attempts: DeliveryAttemptsTable;
  events: EventsTable;
  leases: LeasesTable;
  nodes: NodesTable;
  rate_limit_buckets: RateLimitBucketsTable;
  sending_domains: SendingDomainsTable;
  webhooks: WebhooksTable;
  webhook_outbox: WebhookOutboxTable;
  webhook_queue: WebhookQueueTable;
  webhook_deliveries: WebhookDeliveriesTable;
  event_tags: EventTagsTable;
  dashboard_users: DashboardUsersTable;
  dashboard_sessions: DashboardSessionsTable;
  dashboard_login_links: DashboardLoginLinksTable;
  templates: TemplatesTable;
  template_versions: TemplateVersionsTable;
  tracking_firsts: TrackingFirstsTable;
  tracking_links: TrackingLinksTable;
  pacing_site_overrides: PacingSiteOverridesTable;
  pacing_suspensions: PacingSuspensionsTable;
  pacing_counts: PacingCountsTable;
  pacing_connection_slots: PacingConnectionSlotsTable;
  ip_pools: IpPoolsTable;
  ip_pool_addresses: IpPoolAddressesTable;
  warmup_policies: WarmupPoliciesTable;
  warmup_counters: WarmupCountersTable;
  warmup_progress: WarmupProgressTable;
  source_addresses: SourceAddressesTable;
  routing_generation: RoutingGenerationTable;
}

/** A transmission's tracked link: version 2 click tokens name `idx` (migration 018). */
export interface TrackingLinksTable {
  tenant_id: string;
  transmission_id: string;
  idx: number;
  url: string;
}

/** The first open of a message (kind `open`, link 0) / first click of a link (kind `click`). */
export interface TrackingFirstsTable {
  tenant_id: string;
  message_id: string;
  kind: string;
  link: number;
  created_at: string;
}
