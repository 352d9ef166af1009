/**
 * The text of an HTML-only notice (Exchange and some webmail bounces), for the plain-text
 * heuristics (heuristics.ts). Inbound HTML comes from anyone, so this is one pass with no tree:
 * no depth to overflow the stack and no stack of open elements to search (html-to-text, used here
 * before the inbound parse-cost work, overflowed on 32 KB of `<div>` until given a depth limit, and its parser
 * then still took 1.5 s on 256 KB of `<div>` and stray closing tags), no backtracking. Tags are
 * dropped, block elements and `<br>` end a line, whitespace collapses except inside `<pre>`,
 * script and style contents are skipped, and the common character references are decoded.
 * Attributes (link targets too) are not text.
 */

const BLOCK = new Set([
  'address',
  'article',
  'blockquote',
  'br',
  'dd',
  'div',
  'dl',
  'dt',
  'footer',
  'h1',
  'h2',
  'h3',
  'h4',
  'h5',
  'h6',
  'header',
  'hr',
  'li',
  'ol',
  'p',
  'pre',
  'section',
  'table',
  'tr',
  'ul',
]);
const CELL = new Set(['td', 'th']);
const RAW_TEXT: Record<string, RegExp> = { script: /<\/script/gi, style: /<\/style/gi };

const NAMED: Record<string, string> = {
  amp: '&',
  lt: '<',
  gt: '>',
  quot: '"',
  apos: "'",
  nbsp: ' ',
};
// Bounded repetitions: each reference is at most 10 characters, so the scan stays linear.
const REFERENCE = /&(?:#(\d{1,7})|#x([0-9a-f]{1,6})|([a-z]{2,6}));/gi;

function decodeReferences(text: string): string {
  if (!text.includes('&')) return text;
  return text.replace(
    REFERENCE,
    (whole, dec: string | undefined, hex: string | undefined, name: string | undefined) => {
      if (name !== undefined) return NAMED[name.toLowerCase()] ?? whole;
      const code = dec !== undefined ? Number(dec) : Number.parseInt(hex ?? '', 16);
      return code > 0 && code <= 0x10ffff && (code < 0xd800 || code > 0xdfff) ? String.fromCodePoint(code) : whole;
    },
  );
}

const isNameStart = (c: number) => (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a);
const isNameChar = (c: number) => isNameStart(c) || (c >= 0x30 && c <= 0x39);

export function htmlNoticeText(html: string): string {
  const out: string[] = [];
  let pre = 0;
  const text = (s: string) => {
    if (s) out.push(decodeReferences(pre > 0 ? s : s.replace(/\s+/g, ' ')));
  };
  /** Start of the text not yet written out, and where to look for the next '<'. */
  let i = 0;
  let from = 0;
  while (i < html.length) {
    const lt = html.indexOf('<', from);
    if (lt < 0) {
      text(html.slice(i));
      break;
    }
    const closing = html.charCodeAt(lt + 1) === 0x2f;
    let nameEnd = lt + (closing ? 2 : 1);
    const nameStart = nameEnd;
    const bang = html.charCodeAt(nameStart) === 0x21 || html.charCodeAt(nameStart) === 0x3f; // <!DOCTYPE>, <?xml?>
    if (!bang && !isNameStart(html.charCodeAt(nameStart))) {
      // A '<' that starts no tag ("a < b") is text.
      from = lt + 1;
      continue;
    }
    text(html.slice(i, lt));
    if (html.startsWith('<!--', lt)) {
      const end = html.indexOf('-->', lt + 4);
      i = from = end < 0 ? html.length : end + 3;
      continue;
    }
    while (isNameChar(html.charCodeAt(nameEnd))) nameEnd++;
    const gt = html.indexOf('>', nameEnd);
    if (gt < 0) break; // an unterminated tag: the rest is inside it
    i = from = gt + 1;
    if (bang) continue;
    const name = html.slice(nameStart, nameEnd).toLowerCase();
    if (name === 'pre') pre = closing ? Math.max(0, pre - 1) : pre + 1;
    if (BLOCK.has(name)) out.push('\n');
    else if (CELL.has(name) && !closing) out.push(' ');
    const raw = RAW_TEXT[name];
    if (raw && !closing && html.charCodeAt(gt - 1) !== 0x2f) {
      raw.lastIndex = i;
      i = from = raw.exec(html) ? raw.lastIndex - (name.length + 2) : html.length;
    }
  }
  return out.join('');
}
