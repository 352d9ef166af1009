/**
 * Renders message content with the template language (template-language.ts): stored
 * templates and inline transmission content alike, for delivery, the preview route and tests.
 * Pure (no database), so it runs on the render threads.
 *
 * Header safety: a rendered subject, display name or header value holding CR, LF or another
 * control character fails the render (that recipient's message fails; nothing is sent) rather
 * than being cleaned up: header injection is never sent. From and Reply-To render only their
 * display name; the address is literal (checked at save and accept, and by the sender policy).
 */
import { formatMailbox, hasControlChars, parseMailbox } from '../../lib/email.ts';
import { textFromHtml } from './text-from-html.ts';
import type { ContentFields } from './stored-content.ts';
import { RenderError, renderPart, usesLanguage, withRenderBudget } from './template-language.ts';

/** Rendered content: the subject always set; `text` the caller's, or generated from html when there is none. */
export interface RenderedContent extends ContentFields {
  subject: string;
}

function headerValue(part: string, key: string, source: string, data: Record<string, unknown>): string {
  const out = renderPart(part, key, source, data, 'none');
  if (hasControlChars(out)) throw new RenderError(part, 'rendered value contains CR, LF or another control character');
  return out;
}

function mailbox(part: string, key: string, source: string | null, data: Record<string, unknown>): string | null {
  if (source === null) return null;
  const m = parseMailbox(source);
  if (!m) throw new RenderError(part, 'is not exactly one acceptable mailbox');
  if (!m.name || !usesLanguage(m.name)) return source;
  const name = headerValue(part, key, m.name, data).trim();
  return formatMailbox({ name: name || null, email: m.email });
}

/**
 * Which compile-cache entries a content's parts use: the same key must always come with the same
 * source. `body` (subject, text, html) may be a template version's (`template:<id>:<version>`);
 * `headers` (from, reply_to, header values, which a send may override) must be the transmission's
 * own unless nothing overrides them (a preview).
 */
export interface RenderKeys {
  body: string;
  headers: string;
}

/** The cache keys of a stored transmission's content (see RenderKeys). */
export function storedKeys(
  transmissionId: string,
  c: { template_id: string | null; template_version?: number | null },
): RenderKeys {
  const own = `tx:${transmissionId}`;
  const body = c.template_id && c.template_version != null ? `template:${c.template_id}:${c.template_version}` : own;
  return { body, headers: own };
}

/**
 * Renders every part with `data` (see RenderKeys for the compile cache), all under one render
 * budget (template-language.ts RENDER_TIME_BUDGET_MS). Throws RenderError.
 */
export function renderContent(c: ContentFields, data: Record<string, unknown>, keys: RenderKeys): RenderedContent {
  return withRenderBudget(() => {
    const key = keys.body;
    const hkey = keys.headers;
    const html = c.html === null ? null : renderPart('html', key, c.html, data, 'html');
    const text = c.text === null ? null : renderPart('text', key, c.text, data, 'none');
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(c.headers)) {
      headers[name] = headerValue(`headers.${name}`, hkey, value, data);
    }
    return {
      subject: headerValue('subject', key, c.subject ?? '', data),
      text: text ?? (html === null ? null : textFromHtml(html)),
      html,
      from: mailbox('from', hkey, c.from, data),
      reply_to: mailbox('reply_to', hkey, c.reply_to, data),
      headers,
    };
  });
}

/** True when rendering would give the same result for any data (nothing uses the language). */
export function isStatic(c: ContentFields): boolean {
  return !usesLanguage(c.subject, c.text, c.html, c.from, c.reply_to, ...Object.values(c.headers));
}

/**
 * The data of one message: recipient `substitution_data` over transmission `substitution_data`
 * over template `defaults`, merged by top-level key (docs/templates.md "Data precedence").
 */
export function mergeData(...layers: (Record<string, unknown> | null | undefined)[]): Record<string, unknown> {
  // No prototype: a "__proto__" key in JSON data stays a plain key instead of a prototype change.
  const out: Record<string, unknown> = Object.create(null);
  for (const layer of layers) if (layer) Object.assign(out, layer);
  return out;
}
