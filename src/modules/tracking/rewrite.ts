/**
 * Click and open tracking in an html part (docs/tracking.md "What is rewritten").
 *
 * The html is tokenized by htmlparser2 (the parser html-to-text already depends on), which tells
 * where each attribute of each real tag starts and ends in the source, so comments, scripts,
 * `<a` inside attribute values or CDATA are never mistaken for links. Only those attribute spans
 * are replaced; every other byte of the html stays as it was written.
 *
 * Rewritten: `href` of `<a>` (and `<area>`) whose value, entities decoded and trimmed, starts
 * with `http://` or `https://`. Left alone: any other scheme (mailto:, tel:, relative and `#`
 * anchors), a tag with `data-postyard-track="false"` (the attribute is removed from the output),
 * and everything past MAX_LINKS links.
 */
import { Parser } from 'htmlparser2';
import { MAX_LINKS } from './token.ts';

export interface RewriteOptions {
  /** The tracking URL of link number `index` (0-based) going to `url`; null = leave it. */
  clickUrl: ((url: string, index: number) => string) | null;
  /** Where the 1x1 open pixel points; null = no pixel. */
  openUrl: string | null;
}

interface Span {
  start: number;
  end: number;
  text: string;
}

const TRACKABLE = /^https?:\/\//i;

function escapeAttr(v: string): string {
  return v.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** The open pixel: shown by no client layout (display:block; 1x1; no border), described as empty. */
export function pixelTag(url: string): string {
  return `<img src="${escapeAttr(url)}" width="1" height="1" alt="" style="display:block;border:0;width:1px;height:1px;" />`;
}

interface Attr {
  name: string;
  value: string;
  start: number;
  end: number;
}

interface Walk {
  /** A trackable link (`url` decoded and trimmed) and its href attribute's span. */
  link(url: string, href: Attr): void;
  /** A link opted out with data-postyard-track="false", and that attribute's span. */
  optOut?(attr: Attr): void;
  /** Where a `</body>` (real or implied) starts. */
  bodyClose?(at: number): void;
}

/**
 * The one reading of "which links are tracked": rewriteHtml (at render) and trackedLinks (at
 * accept) must agree, since a link's URL is looked up in what accept stored.
 */
function walk(html: string, w: Walk): void {
  // Attributes of the tag being read: name -> [start, end) in the source, and its decoded value.
  let attrs: Attr[] = [];
  const parser = new Parser(
    {
      onattribute(name, value) {
        attrs.push({ name, value, start: parser.startIndex, end: parser.endIndex });
      },
      onopentag(name) {
        const list = attrs;
        attrs = [];
        if (name !== 'a' && name !== 'area') return;
        const optOut = list.find((a) => a.name === 'data-postyard-track');
        if (optOut && optOut.value.trim().toLowerCase() === 'false') {
          w.optOut?.(optOut);
          return;
        }
        const href = list.find((a) => a.name === 'href');
        if (!href) return;
        const url = href.value.trim();
        if (TRACKABLE.test(url)) w.link(url, href);
      },
      onclosetag(name) {
        if (name === 'body') w.bodyClose?.(parser.startIndex);
      },
    },
    { decodeEntities: true, lowerCaseAttributeNames: true, lowerCaseTags: true, recognizeSelfClosing: true },
  );
  parser.end(html);
}

/**
 * The distinct URLs of the links rewriteHtml would track, in order of first appearance, for the
 * transmission's link table (tracking/links.ts): at most MAX_LINKS + 1 of them. A URL holding
 * template-language syntax (`{{`) is left out: what it becomes is only known per recipient, so
 * such a link keeps a token that carries its URL.
 */
export function trackedLinks(html: string): string[] {
  const seen = new Set<string>();
  walk(html, {
    link(url) {
      if (seen.size <= MAX_LINKS && !url.includes('{{')) seen.add(url);
    },
  });
  return [...seen];
}

/** Returns the html with its links and pixel as asked; `html` itself when there is nothing to do. */
export function rewriteHtml(html: string, opts: RewriteOptions): string {
  if (!opts.clickUrl && !opts.openUrl) return html;
  const clickUrl = opts.clickUrl;
  const edits: Span[] = [];
  let links = 0;
  let bodyClose = -1;
  walk(html, {
    link(url, href) {
      if (!clickUrl || links > MAX_LINKS) return;
      edits.push({ start: href.start, end: href.end, text: `href="${escapeAttr(clickUrl(url, links))}"` });
      links++;
    },
    optOut(attr) {
      if (!clickUrl) return;
      let end = attr.end; // with the blanks after it, so `<a x="false" href` reads `<a href`
      while (end < html.length && /\s/.test(html[end] ?? '')) end++;
      edits.push({ start: attr.start, end, text: '' });
    },
    bodyClose(at) {
      bodyClose = at;
    },
  });
  if (opts.openUrl) {
    // Before </body> when the source has one (the last one: the parser reports implied closes
    // at the end too, which have no text to insert before), else at the very end.
    const at = bodyClose >= 0 && html.slice(bodyClose, bodyClose + 2) === '</' ? bodyClose : html.length;
    edits.push({ start: at, end: at, text: pixelTag(opts.openUrl) });
  }
  if (edits.length === 0) return html;
  edits.sort((a, b) => a.start - b.start);
  let out = '';
  let pos = 0;
  for (const e of edits) {
    out += html.slice(pos, e.start) + e.text;
    pos = e.end;
  }
  return out + html.slice(pos);
}
