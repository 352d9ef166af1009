/**
 * Previews: content rendered with sample data on the template sandbox's threads
 * (template-sandbox.ts), never on the event loop. Syntax errors and render problems are 422
 * naming the part (and line). Used for a stored template's version and for the dashboard
 * editor's content that is not saved yet.
 */
import { createHash } from 'node:crypto';
import { validationError } from '../../lib/errors.ts';
import { fieldProblems, languageProblems } from './content-rules.ts';
import { mergeData, type RenderedContent } from './render-content.ts';
import type { ContentFields } from './stored-content.ts';
import { RenderError } from './template-language.ts';
import { templateSandbox } from './template-sandbox.ts';

export type PreviewView = Pick<RenderedContent, 'subject' | 'text' | 'html'>;

/** A preview rendered on the template sandbox; render problems are 422 naming the part. */
export async function renderPreview(
  content: ContentFields,
  data: Record<string, unknown>,
  key: string,
): Promise<PreviewView> {
  try {
    const out = await templateSandbox.render(content, data, { body: key, headers: key });
    return { subject: out.subject, text: out.text, html: out.html };
  } catch (err) {
    if (err instanceof RenderError) throw validationError([{ field: err.part, message: `${err.part}: ${err.detail}` }]);
    throw err;
  }
}

/**
 * Renders content that is not saved yet (the dashboard editor's live preview), after the checks
 * a save would make. Compiled parts are cached on the sandbox by a digest of their source.
 */
export async function previewUnsaved(input: {
  subject: string;
  text?: string | null | undefined;
  html?: string | null | undefined;
  defaults?: Record<string, unknown> | undefined;
  substitution_data?: Record<string, unknown> | undefined;
}): Promise<PreviewView> {
  const c = { subject: input.subject, text: input.text ?? null, html: input.html ?? null };
  const problems = [...fieldProblems(c), ...(await languageProblems(c, ''))];
  if (problems.length) throw validationError(problems);
  const key = `unsaved:${createHash('sha256').update(JSON.stringify(c)).digest('base64url')}`;
  return renderPreview(
    { ...c, from: null, reply_to: null, headers: {} },
    mergeData(input.defaults, input.substitution_data),
    key,
  );
}
