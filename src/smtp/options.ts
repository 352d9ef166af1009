import { hasControlChars } from '../lib/email.ts';
import { MAX_METADATA_BYTES, MAX_METADATA_KEYS, MAX_TAGS } from '../modules/transmissions/transmissions.schema.ts';
import { reply } from './replies.ts';

/** The `X-Postyard-Options` header (docs/smtp.md "X-Postyard-Options"), validated like the API's `options`. */
export interface SubmissionOptions {
  tags: string[];
  metadata: Record<string, string>;
  mailType: 'transactional' | 'marketing';
  idempotencyKey: string | undefined;
  /** A stored template for the message's content (docs/templates.md "Over SMTP"). */
  templateId: string | undefined;
  useDraft: boolean;
  /** Data for the template (over its defaults). */
  substitutionData: Record<string, unknown> | undefined;
  /** An IP pool's id or name (docs/ip-pools.md); resolved at accept, unknown = 5.6.0 like the API's 422. */
  ipPool: string | undefined;
}

export const OPTIONS_HEADER = 'x-postyard-options';
const KNOWN = new Set([
  'tags',
  'metadata',
  'mail_type',
  'idempotency_key',
  'template_id',
  'use_draft',
  'substitution_data',
  'ip_pool',
]);
const IDEMPOTENCY_KEY = /^[\x20-\x7e]{1,255}$/;

const fail = (text: string) => reply.malformed(`X-Postyard-Options: ${text}`);

export function parseOptions(value: string | undefined): SubmissionOptions {
  const out: SubmissionOptions = {
    tags: [],
    metadata: {},
    mailType: 'transactional',
    idempotencyKey: undefined,
    templateId: undefined,
    useDraft: false,
    substitutionData: undefined,
    ipPool: undefined,
  };
  if (value === undefined || value.trim() === '') return out;
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    throw fail('not valid JSON; expected {"tags":[],"metadata":{},"mail_type":"","idempotency_key":""}');
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw fail('must be a JSON object');
  const o = parsed as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (!KNOWN.has(k)) throw fail(`unknown field "${k}" (allowed: ${[...KNOWN].join(', ')})`);
  }

  if (o.tags !== undefined) {
    if (!Array.isArray(o.tags)) throw fail('tags must be an array of strings');
    for (const t of o.tags) {
      if (typeof t !== 'string' || t.length < 1 || t.length > 64 || hasControlChars(t)) {
        throw fail('each tag must be a string of 1-64 characters without control characters');
      }
    }
    out.tags = [...new Set(o.tags as string[])];
    if (out.tags.length > MAX_TAGS) throw fail(`at most ${MAX_TAGS} tags`);
  }

  if (o.metadata !== undefined) {
    if (!o.metadata || typeof o.metadata !== 'object' || Array.isArray(o.metadata)) {
      throw fail('metadata must be an object of string values');
    }
    const entries = Object.entries(o.metadata as Record<string, unknown>);
    if (entries.length > MAX_METADATA_KEYS) throw fail(`metadata may hold at most ${MAX_METADATA_KEYS} keys`);
    for (const [k, v] of entries) {
      if (typeof v !== 'string') throw fail(`metadata.${k} must be a string`);
      if (k.length > 128 || v.length > 4096)
        throw fail(`metadata.${k}: keys are at most 128 and values 4096 characters`);
    }
    out.metadata = Object.fromEntries(entries) as Record<string, string>;
    if (Buffer.byteLength(JSON.stringify(out.metadata)) > MAX_METADATA_BYTES)
      throw fail('metadata may be at most 10 KB serialized');
  }

  if (o.mail_type !== undefined && o.mail_type !== '') {
    if (o.mail_type !== 'transactional' && o.mail_type !== 'marketing') {
      throw fail('mail_type must be "transactional" or "marketing"');
    }
    out.mailType = o.mail_type;
  }

  if (o.idempotency_key !== undefined && o.idempotency_key !== '') {
    if (typeof o.idempotency_key !== 'string' || !IDEMPOTENCY_KEY.test(o.idempotency_key)) {
      throw fail('idempotency_key must be 1-255 printable ASCII characters');
    }
    out.idempotencyKey = o.idempotency_key;
  }

  if (o.template_id !== undefined) {
    if (typeof o.template_id !== 'string' || o.template_id.length < 1 || o.template_id.length > 64)
      throw fail('template_id must be a template id');
    out.templateId = o.template_id;
  }
  if (o.use_draft !== undefined) {
    if (typeof o.use_draft !== 'boolean') throw fail('use_draft must be true or false');
    out.useDraft = o.use_draft;
  }
  if (o.substitution_data !== undefined) {
    const d = o.substitution_data;
    if (!d || typeof d !== 'object' || Array.isArray(d)) throw fail('substitution_data must be a JSON object');
    if (Object.keys(d).length > 200) throw fail('substitution_data may hold at most 200 keys');
    out.substitutionData = d as Record<string, unknown>;
  }
  if (o.ip_pool !== undefined) {
    if (typeof o.ip_pool !== 'string' || o.ip_pool.length < 1 || o.ip_pool.length > 128)
      throw fail("ip_pool must be an IP pool's id or name");
    out.ipPool = o.ip_pool;
  }
  return out;
}
