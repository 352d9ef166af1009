/**
 * The text part generated for HTML-only mail (docs/templates.md "Text part"): receivers score
 * HTML-only messages as spam-like, so one is always added. html-to-text (a kept library, not a
 * regex) turns links into "text [url]", lists into "* item", tables into aligned text; lines are
 * wrapped at 78 characters (RFC 5322's recommended line length). The caller's own text part
 * always wins: this runs only when the content has none.
 */
import { compile } from 'html-to-text';
import { HTML_TOO_DEEP, htmlTooDeep } from '../../lib/html-depth.ts';
import { RenderError } from './template-language.ts';

const convert = compile({
  wordwrap: 78,
  selectors: [
    // Images carry no text worth a line of their own; their alt text is kept by default.
    { selector: 'img', format: 'skip' },
    // Link targets are shown once, not repeated when the text already is the URL.
    { selector: 'a', options: { hideLinkHrefIfSameAsText: true } },
  ],
});

/**
 * Throws RenderError (`render_failed: html: ...`) for html nested deeper than MAX_HTML_DEPTH:
 * html-to-text would overflow the call stack (src/lib/html-depth.ts).
 */
export function textFromHtml(html: string): string {
  if (htmlTooDeep(html)) throw new RenderError('html', HTML_TOO_DEEP);
  return convert(html);
}
