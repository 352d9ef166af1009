/**
 * @postyard/client: the TypeScript client of the Postyard email API.
 *
 *   const client = new Postyard({ apiKey: process.env.POSTYARD_KEY!, baseUrl: 'http://127.0.0.1:3000' });
 *   const fromEnv = new Postyard(); // POSTYARD_API_KEY and POSTYARD_BASE_URL
 *   await client.transmissions.send({ recipients: [{ email: 'ann@example.com' }], content: { subject: 'Hi', text: 'Hello' } });
 *
 * Every call has a timeout (30 s), is retried on 429, 5xx and network errors only (3 times, with
 * exponential backoff and full jitter, honouring Retry-After), and create-style calls carry one
 * Idempotency-Key on every attempt, so a retry never sends twice.
 */
import { HttpClient, type PostyardOptions } from './http.ts';
import {
  ApiKeys,
  Events,
  Messages,
  SendingDomains,
  SmtpCredentials,
  Suppressions,
  Templates,
  TrackingSettings,
  Transmissions,
  Webhooks,
} from './resources.ts';
import { IpPools, Pacing, WarmupPolicies } from './resources-sending.ts';

export class Postyard {
  readonly transmissions: Transmissions;
  readonly messages: Messages;
  readonly suppressions: Suppressions;
  readonly webhooks: Webhooks;
  readonly events: Events;
  readonly apiKeys: ApiKeys;
  readonly smtpCredentials: SmtpCredentials;
  readonly sendingDomains: SendingDomains;
  readonly templates: Templates;
  readonly trackingSettings: TrackingSettings;
  readonly ipPools: IpPools;
  readonly warmupPolicies: WarmupPolicies;
  readonly pacing: Pacing;

  /** Without `apiKey` / `baseUrl`, the environment's POSTYARD_API_KEY / POSTYARD_BASE_URL are used. */
  constructor(options: PostyardOptions = {}) {
    const http = new HttpClient(options);
    this.transmissions = new Transmissions(http);
    this.messages = new Messages(http);
    this.suppressions = new Suppressions(http);
    this.webhooks = new Webhooks(http);
    this.events = new Events(http);
    this.apiKeys = new ApiKeys(http);
    this.smtpCredentials = new SmtpCredentials(http);
    this.sendingDomains = new SendingDomains(http);
    this.templates = new Templates(http);
    this.trackingSettings = new TrackingSettings(http);
    this.ipPools = new IpPools(http);
    this.warmupPolicies = new WarmupPolicies(http);
    this.pacing = new Pacing(http);
  }
}

export { ENDPOINTS, type EndpointName, HELPERS, KEYED_POSTS, UNKEYED_POSTS } from './endpoints.ts';
export {
  type ApiErrorDetail,
  PostyardAuthenticationError,
  PostyardConflictError,
  PostyardError,
  PostyardNetworkError,
  PostyardNotFoundError,
  PostyardRateLimitError,
  PostyardScopeError,
  PostyardServerError,
  PostyardValidationError,
  WebhookVerificationFailed,
} from './errors.ts';
export {
  CLIENT_VERSION,
  isRetryable,
  parseRetryAfter,
  type PostyardOptions,
  type RequestOptions,
  type RetryInfo,
} from './http.ts';
export { type ImportOptions, paginate } from './resources.ts';
export type * from './types.ts';
export { type HeadersLike, verifyWebhook, webhookEvents } from './webhook-verify.ts';
