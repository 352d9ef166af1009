/** Shapes of the dashboard API's answers (the same views as /v1). */
export interface Session {
  authenticated: true;
  csrf_token: string;
  expires_at: string;
  user: { id: string; email: string; has_password: boolean; last_login_at: string | null };
  tenant: { id: string; name: string; default_from: string | null };
  password_reset_allowed: boolean;
  smtp: { port: number; implicit_tls_port: number | null };
}

export type SignedOut = { authenticated: false; csrf_token: string };

export interface ApiKey {
  id: string;
  name: string;
  scopes: string[];
  key_prefix: string;
  created_at: string;
  last_used_at: string | null;
}

export interface SmtpCredential {
  id: string;
  name: string;
  username: string;
  created_at: string;
  last_used_at: string | null;
}

export interface Webhook {
  id: string;
  name: string;
  url: string;
  events: string[];
  dispatch_policy: 'single' | 'batch';
  batch_max_size: number;
  batch_max_wait_ms: number;
  enabled: boolean;
  status: 'active' | 'disabled';
  disabled_reason: string | null;
  created_at: string;
  updated_at: string;
}

export interface WebhookDelivery {
  id: string;
  created_at: string;
  outcome: 'delivered' | 'retrying' | 'failed';
  status_code: number | null;
  duration_ms: number;
  error: string | null;
  attempt: number;
  next_attempt_at: string | null;
  event_ids: string[];
  test: boolean;
}

export interface TestResult {
  delivered: boolean;
  status_code: number | null;
  duration_ms: number;
  error: string | null;
}

export interface Suppression {
  id: string;
  identifier: string;
  type: 'email' | 'domain';
  reason_category: string;
  description: string | null;
  source: string;
  created_at: string;
  updated_at: string;
}

export interface DnsRecord {
  purpose: 'dkim' | 'spf' | 'return_path' | 'dmarc';
  type: 'TXT' | 'CNAME';
  name: string;
  value: string;
  required: boolean;
  status: 'pending' | 'verified' | 'failed';
  last_checked_at: string | null;
  error: string | null;
}

export interface Domain {
  id: string;
  domain: string;
  status: 'pending' | 'verified' | 'failed';
  status_reason: string | null;
  dkim_selector: string;
  dns_records: DnsRecord[];
  verified_at: string | null;
  created_at: string;
}

export interface EventItem {
  id: string;
  type: string;
  created_at: string;
  transmission_id: string | null;
  message_id: string | null;
  recipient: string | null;
  mail_type: string | null;
  tags: string[];
  metadata: Record<string, string>;
  data: Record<string, unknown>;
}

export interface Attempt {
  attempt: number;
  started_at: string;
  finished_at: string;
  mx_host: string | null;
  address: string | null;
  tls: boolean;
  outcome: string;
  smtp_code: number | null;
  enhanced_code: string | null;
  response: string | null;
  transcript: string | null;
}

export interface Message {
  id: string;
  transmission_id: string;
  recipient: string;
  recipient_name: string | null;
  /** How the recipient was addressed: `cc` and `bcc` only in a group message. */
  role: 'to' | 'cc' | 'bcc';
  state: string;
  attempt_count: number;
  next_attempt_at: string | null;
  last_response: string | null;
  metadata: Record<string, string>;
  created_at: string;
  updated_at: string;
  attempts: Attempt[];
  /** Only on the dashboard's message endpoint. */
  engagement?: Engagement;
}

export type SeriesName =
  | 'sent'
  | 'delivered'
  | 'deferred'
  | 'bounced'
  | 'complaints'
  | 'failed'
  | 'suppressed'
  | 'opens'
  | 'opens_machine'
  | 'clicks'
  | 'clicks_machine';

/** Opens and clicks of one message; machines = privacy proxies and link scanners (`machine: true`). */
export interface Engagement {
  opens: { people: number; machines: number };
  clicks: { people: number; machines: number };
}

export interface Stats {
  range: '24h' | '7d' | '30d';
  bucket: 'hour' | 'day';
  from: string;
  to: string;
  buckets: ({ start: string } & Record<SeriesName, number>)[];
  totals: Record<SeriesName, number>;
  delivery_rate: number | null;
}

export interface TemplateVersion {
  version: number;
  subject: string;
  text: string | null;
  html: string | null;
  from: string | null;
  reply_to: string | null;
  headers: Record<string, string>;
  defaults: Record<string, unknown>;
  created_at: string;
}

export interface Template {
  id: string;
  name: string;
  description: string | null;
  published: TemplateVersion | null;
  draft: TemplateVersion | null;
  created_at: string;
  updated_at: string;
}

export interface TemplatePreview {
  subject: string;
  text: string | null;
  html: string | null;
}
