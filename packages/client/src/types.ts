/**
 * Every request and response type of the client is derived here from the generated OpenAPI types
 * (src/generated/openapi.ts), never written by hand: when a route schema changes, regenerating
 * changes these types and the compiler points at every call that no longer fits.
 */
import type { components, paths } from './generated/openapi.ts';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
export type ApiPath = keyof paths;

/** The operation object of `M P` (never when the document has no such operation). */
type Operation<P extends ApiPath, M extends HttpMethod> = NonNullable<paths[P][Lowercase<M>]>;

type Json<T> = T extends { content: { 'application/json': infer B } } ? B : never;
type SuccessStatus = 200 | 201 | 202 | 204;

/** The JSON request body of `M P`. */
export type RequestBody<P extends ApiPath, M extends HttpMethod> =
  Operation<P, M> extends { requestBody?: infer R } ? Json<NonNullable<R>> : never;

/** The body of the 2xx answer of `M P` (void for 204). */
export type ResponseBody<P extends ApiPath, M extends HttpMethod> =
  Operation<P, M> extends { responses: infer R }
    ? { [C in keyof R]: C extends SuccessStatus ? (C extends 204 ? undefined : Json<R[C]>) : never }[keyof R]
    : never;

/** The query parameters of `M P`. */
export type QueryParams<P extends ApiPath, M extends HttpMethod> =
  Operation<P, M> extends { parameters: { query?: infer Q } } ? NonNullable<Q> : never;

/** One element of the `data` array of a list answer. */
export type ItemOf<P extends ApiPath> = ResponseBody<P, 'GET'> extends { data: (infer T)[] } ? T : never;

/** A page of a list endpoint: `{"data":[...],"next_cursor":"opaque"|null}`. */
export interface Page<T> {
  data: T[];
  next_cursor: string | null;
}

/** List filters without the cursor (iteration helpers manage it). */
export type ListFilters<P extends ApiPath> = Omit<QueryParams<P, 'GET'>, 'cursor'>;

export type Schemas = components['schemas'];
export type ApiErrorBody = Schemas['ErrorBody'];

// ---- named types users reach for ---------------------------------------------------------------

export type TransmissionRequest = RequestBody<'/v1/transmissions', 'POST'>;
export type AcceptedTransmission = ResponseBody<'/v1/transmissions', 'POST'>;
export type Transmission = ResponseBody<'/v1/transmissions/{id}', 'GET'>;
export type Message = ResponseBody<'/v1/messages/{id}', 'GET'>;

export type Suppression = ItemOf<'/v1/suppressions'>;
export type SuppressionUpsert = RequestBody<'/v1/suppressions', 'POST'>;
export type SuppressionItem = SuppressionUpsert['items'][number];
export type SuppressionFilters = ListFilters<'/v1/suppressions'>;
type SuppressionPostAnswer = ResponseBody<'/v1/suppressions', 'POST'>;
export type SuppressionUpsertResult = Extract<SuppressionPostAnswer, { created: number }>;
export type SuppressionImportResult = Extract<SuppressionPostAnswer, { imported: number }>;

export type Webhook = Schemas['Webhook'];
export type WebhookCreate = RequestBody<'/v1/webhooks', 'POST'>;
export type CreatedWebhook = ResponseBody<'/v1/webhooks', 'POST'>;
export type WebhookUpdate = RequestBody<'/v1/webhooks/{id}', 'PATCH'>;
export type RotatedSecret = ResponseBody<'/v1/webhooks/{id}/rotate-secret', 'POST'>;
export type WebhookTestResult = ResponseBody<'/v1/webhooks/{id}/test', 'POST'>;
export type WebhookDelivery = Schemas['WebhookDelivery'];

export type PostyardEvent = Schemas['Event'];
export type EventType = PostyardEvent['type'];
export type EventFilters = ListFilters<'/v1/events'>;

export type ApiKey = ItemOf<'/v1/api-keys'>;
export type ApiKeyCreate = RequestBody<'/v1/api-keys', 'POST'>;
export type CreatedApiKey = ResponseBody<'/v1/api-keys', 'POST'>;
export type Scope = ApiKeyCreate['scopes'][number];

export type SmtpCredential = ItemOf<'/v1/smtp-credentials'>;
export type SmtpCredentialCreate = RequestBody<'/v1/smtp-credentials', 'POST'>;
export type CreatedSmtpCredential = ResponseBody<'/v1/smtp-credentials', 'POST'>;

export type SendingDomain = ResponseBody<'/v1/sending-domains/{id}', 'GET'>;
export type SendingDomainCreate = RequestBody<'/v1/sending-domains', 'POST'>;
export type SendingDomainUpdate = RequestBody<'/v1/sending-domains/{id}', 'PATCH'>;

export type Template = Schemas['Template'];
export type TemplateVersion = Schemas['TemplateVersion'];
export type TemplateCreate = RequestBody<'/v1/templates', 'POST'>;
export type TemplateUpdate = RequestBody<'/v1/templates/{id}', 'PATCH'>;
export type TemplatePreviewRequest = RequestBody<'/v1/templates/{id}/preview', 'POST'>;
export type TemplatePreview = ResponseBody<'/v1/templates/{id}/preview', 'POST'>;

export type IpPool = Schemas['IpPool'];
export type IpPoolCreate = RequestBody<'/v1/ip-pools', 'POST'>;
export type IpPoolUpdate = RequestBody<'/v1/ip-pools/{id}', 'PATCH'>;

export type WarmupPolicy = Schemas['WarmupPolicy'];
export type WarmupPolicyCreate = RequestBody<'/v1/warmup-policies', 'POST'>;
export type WarmupPolicyUpdate = RequestBody<'/v1/warmup-policies/{id}', 'PATCH'>;

export type PacingSite = Schemas['PacingSite'];
export type PacingSiteLimits = RequestBody<'/v1/pacing/sites/{site}', 'PUT'>;
export type PacingSuspension = Schemas['PacingSuspension'];

/** A webhook request body: one event (single policy) or a batch (batch policy). */
export type WebhookPayload = PostyardEvent | { batch_id: string; events: PostyardEvent[] };
