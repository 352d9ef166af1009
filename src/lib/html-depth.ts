/**
 * How deeply HTML nests elements, as the parser behind html-to-text and click tracking
 * (htmlparser2, default options) builds the tree: void elements, implied closes (`<p>` in `<p>`,
 * `<li>` after `<li>`) and stray end tags count as they do there. html-to-text walks that tree by
 * recursion, so a few thousand nested elements overflow the call stack (1,413
 * nested `<ul>` on an otherwise empty main-thread stack). Content over MAX_HTML_DEPTH is refused
 * at save and accept (422 naming the field) and fails its message at render (`render_failed`).
 *
 * The parser is streamed (no tree) and stopped at the first element past the limit, so the work
 * is linear in the input: each tag costs at most a search of the MAX_HTML_DEPTH open elements.
 */
import { Parser } from 'htmlparser2';

/**
 * Chromium's HTML parser nests at most 512 elements (deeper ones are attached to the 512th), so
 * no page or mail renders deeper than that anyway; html-to-text overflows from about 1,400
 * nested lists on the main thread, so 512 leaves room for the frames of whatever calls it.
 */
export const MAX_HTML_DEPTH = 512;

class TooDeep extends Error {}

/** True when `html` nests more than `limit` elements at some point. */
export function htmlTooDeep(html: string, limit = MAX_HTML_DEPTH): boolean {
  // Cheap exit: fewer tags than the limit cannot nest deeper than it.
  let tags = 0;
  for (let i = html.indexOf('<'); i !== -1 && tags <= limit; i = html.indexOf('<', i + 1)) tags++;
  if (tags <= limit) return false;
  let depth = 0;
  const parser = new Parser({
    onopentagname() {
      depth++;
      if (depth > limit) throw new TooDeep();
    },
    onclosetag() {
      depth--;
    },
  });
  try {
    parser.end(html);
  } catch (err) {
    if (err instanceof TooDeep) return true;
    throw err;
  }
  return false;
}

/** The reason given for HTML that nests too deeply (422 message, `render_failed` detail). */
export const HTML_TOO_DEEP = `html nests elements more than ${MAX_HTML_DEPTH} deep`;

/** The save/accept check of an html field (`content.html`, `html`): a problem naming it, or none. */
export function htmlDepthProblems(
  html: string | null | undefined,
  field: string,
): { field: string; message: string }[] {
  return typeof html === 'string' && htmlTooDeep(html) ? [{ field, message: `${field}: ${HTML_TOO_DEEP}` }] : [];
}
