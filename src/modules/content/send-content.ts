/**
 * Sending with the template language (docs/templates.md "Sending"): the content a transmission
 * stores when it names `content.template_id` (a copy of the version it resolved, so a later
 * publish or delete does not change mail already accepted), and the checks of inline content.
 * Used by POST /v1/transmissions (transmissions.validate.ts) and SMTP submission.
 */
import { domainOf, formatMailbox, parseMailbox } from '../../lib/email.ts';
import { validationError } from '../../lib/errors.ts';
import { htmlDepthProblems } from '../../lib/html-depth.ts';
import { languageProblems, type Problem } from './content-rules.ts';
import { mergeData } from './render-content.ts';
import type { ContentFields, StoredContent } from './stored-content.ts';

/** The request's content fields this module reads (the API's `content`: each field absent or set). */
export type RequestContent = { [K in keyof ContentFields]?: NonNullable<ContentFields[K]> } & {
  template_id?: string;
  use_draft?: boolean;
};

/**
 * A stored template's version as sending uses it (a copy is stored with each transmission):
 * what the templates module's forSend answers for content.template_id.
 */
export interface TemplateForSend {
  templateId: string;
  version: number;
  content: ContentFields & { subject: string; defaults: Record<string, unknown> };
}

/**
 * The content to check and store: the request's own, or the template version's with the
 * request's from / reply_to / headers over it. `template` is what content.template_id resolved
 * to (null: unknown or unpublished; undefined: no template_id).
 */
export function effectiveContent<C extends RequestContent>(
  c: C,
  template: TemplateForSend | null | undefined,
): C & { subject: string } {
  if (!template) return { ...c, subject: c.subject ?? '' };
  const t = template.content;
  return {
    ...c,
    subject: t.subject,
    ...(t.text !== null ? { text: t.text } : {}),
    ...(t.html !== null ? { html: t.html } : {}),
    ...(c.from === undefined && t.from !== null ? { from: t.from } : {}),
    ...(c.reply_to === undefined && t.reply_to !== null ? { reply_to: t.reply_to } : {}),
    headers: { ...t.headers, ...(c.headers ?? {}) },
  };
}

/** Problems of content.template_id, or of inline content (the language's syntax, named content.<part>). */
export async function sendProblems(
  c: RequestContent,
  template: TemplateForSend | null | undefined,
): Promise<Problem[]> {
  if (c.template_id === undefined) {
    const problems: Problem[] = [];
    if (c.subject === undefined) problems.push({ field: 'content.subject', message: 'content.subject is required' });
    return [...problems, ...(await languageProblems(c, 'content.')), ...htmlDepthProblems(c.html, 'content.html')];
  }
  if (!template)
    return [
      {
        field: 'content.template_id',
        message: c.use_draft
          ? 'no such template'
          : 'no such template, or it has no published version (publish it, or send with use_draft: true)',
      },
    ];
  const mixed = (['subject', 'text', 'html'] as const).filter((k) => c[k] !== undefined);
  if (mixed.length > 0)
    return [
      { field: 'content.template_id', message: `content.template_id cannot be combined with ${mixed.join(', ')}` },
    ];
  // The request's own from / reply_to / headers may use the language too.
  return languageProblems({ from: c.from, reply_to: c.reply_to, headers: c.headers }, 'content.');
}

/** What the stored content carries beyond the request's fields. */
export function storedTemplateFields(
  template: TemplateForSend | null | undefined,
  transmissionData: Record<string, unknown> | undefined,
): { template_version: number | null; substitution_data: Record<string, unknown> | null } {
  const data = mergeData(template?.content.defaults, transmissionData);
  return {
    template_version: template?.version ?? null,
    substitution_data: Object.keys(data).length > 0 ? { ...data } : null,
  };
}

/**
 * SMTP submission with `template_id` in X-Postyard-Options: the message's own body is replaced
 * by the template's; its From stays unless the template has one (whose domain is then checked by
 * the sender policy as well).
 */
export function applyTemplateToSubmission<
  I extends { content: StoredContent; rawMessage: Buffer | null; senderDomains: string[] },
>(input: I, templateId: string, template: TemplateForSend | null, data: Record<string, unknown> | undefined): I {
  if (!template)
    throw validationError([
      { field: 'template_id', message: 'no such template, or it has no published version (X-Postyard-Options)' },
    ]);
  const t = template.content;
  const from = t.from === null ? null : parseMailbox(t.from);
  return {
    ...input,
    rawMessage: null,
    content: {
      ...input.content,
      subject: t.subject,
      from: from ? formatMailbox(from) : input.content.from,
      reply_to: t.reply_to ?? input.content.reply_to,
      text: t.text,
      html: t.html,
      headers: t.headers,
      template_id: templateId,
      ...storedTemplateFields(template, data),
    },
    // The template's From is the one sent: its domain comes first (the sender policy's From).
    senderDomains: [...new Set([...(from ? [domainOf(from.email)] : []), ...input.senderDomains])],
  };
}
