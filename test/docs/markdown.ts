/** Just enough Markdown parsing for the documentation tests: headings, table rows, fenced blocks. */

export interface Section {
  level: number;
  /** Heading text without #'s and backticks. */
  title: string;
  /** Everything up to the next heading of the same or a higher level (sub-sections included). */
  body: string;
}

export interface FencedBlock {
  /** The info string after the opening fence, e.g. "sh run expect=422" or "ts file=examples/send.ts". */
  info: string;
  lang: string;
  attrs: Record<string, string>;
  code: string;
  /** Title of the closest heading above the block. */
  heading: string;
}

const FENCE = /^(`{3,}|~{3,})(.*)$/;

/** Lines with a flag telling whether each lies inside a fenced block (fences included). */
function scan(md: string): { line: string; fenced: boolean }[] {
  let open: string | null = null;
  return md.split('\n').map((line) => {
    const m = FENCE.exec(line.trim());
    if (m) {
      const fence = m[1] as string;
      if (open === null) {
        open = fence;
        return { line, fenced: true };
      }
      if (line.trim().startsWith(open) && (m[2] ?? '').trim() === '') {
        open = null;
        return { line, fenced: true };
      }
    }
    return { line, fenced: open !== null };
  });
}

export function sections(md: string): Section[] {
  const lines = scan(md);
  const heads: { index: number; level: number; title: string }[] = [];
  lines.forEach(({ line, fenced }, index) => {
    const m = !fenced ? /^(#{1,6})\s+(.*)$/.exec(line) : null;
    if (m) heads.push({ index, level: (m[1] as string).length, title: (m[2] as string).replace(/`/g, '').trim() });
  });
  return heads.map((h, i) => {
    const next = heads.slice(i + 1).find((n) => n.level <= h.level);
    const body = lines
      .slice(h.index + 1, next ? next.index : lines.length)
      .map((l) => l.line)
      .join('\n');
    return { level: h.level, title: h.title, body };
  });
}

/** Table rows (outside code) as cells; header and separator rows are included, callers filter. */
export function tableRows(text: string): string[][] {
  return scan(text)
    .filter(({ line, fenced }) => !fenced && line.trim().startsWith('|'))
    .map(({ line }) =>
      line
        .trim()
        .replace(/^\||\|$/g, '')
        .split(/(?<!\\)\|/)
        .map((c) => c.trim()),
    );
}

/** The `code` spans of a string (outside fenced blocks; a span never crosses a line). */
export function codeSpans(text: string): string[] {
  const prose = scan(text)
    .filter((l) => !l.fenced)
    .map((l) => l.line)
    .join('\n');
  return [...prose.matchAll(/`([^`\n]+)`/g)].map((m) => m[1] as string);
}

export function fencedBlocks(md: string): FencedBlock[] {
  const out: FencedBlock[] = [];
  const lines = md.split('\n');
  let heading = '';
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] as string;
    const h = /^#{1,6}\s+(.*)$/.exec(line);
    if (h) heading = (h[1] as string).replace(/`/g, '').trim();
    const m = FENCE.exec(line.trim());
    if (!m) continue;
    const fence = m[1] as string;
    const info = (m[2] ?? '').trim();
    const code: string[] = [];
    for (i++; i < lines.length && !(lines[i] as string).trim().startsWith(fence); i++) code.push(lines[i] as string);
    const [lang = '', ...rest] = info.split(/\s+/);
    const attrs: Record<string, string> = {};
    for (const r of rest) {
      const [k, v] = r.split('=');
      if (k) attrs[k] = v ?? 'true';
    }
    out.push({ info, lang, attrs, code: `${code.join('\n')}\n`, heading });
  }
  return out;
}

/** "10,000" and "10 000" read as 10000, so limits can be written for people. */
export function normalizeNumbers(text: string): string {
  return text.replace(/(\d)[,\u202f\u2009\u00a0_](?=\d{3}(?:\D|$))/g, '$1');
}

export function mentionsNumber(text: string, n: number): boolean {
  return new RegExp(`(^|[^\\d.])${n}(?![\\d])`).test(normalizeNumbers(text));
}

/**
 * The environment a page tells the reader to start Postyard with: the `NAME=value` assignments
 * in front of `npm start` in the first fenced block that runs it, e.g.
 * `npm install && POSTYARD_DEV_MODE=true npm start` gives `{ POSTYARD_DEV_MODE: 'true' }`.
 * Walkthrough tests start their server with exactly this, so page and test cannot drift apart.
 */
export function startCommandEnv(md: string): Record<string, string> {
  for (const block of fencedBlocks(md)) {
    for (const line of block.code.split('\n')) {
      const m = /(?:^|&&|;)\s*((?:[A-Z_][A-Z0-9_]*=\S*\s+)*)npm start\b/.exec(line.replace(/#.*$/, ''));
      if (!m) continue;
      const env: Record<string, string> = {};
      for (const pair of (m[1] ?? '').trim().split(/\s+/).filter(Boolean)) {
        const eq = pair.indexOf('=');
        env[pair.slice(0, eq)] = pair.slice(eq + 1).replace(/^(['"])(.*)\1$/, '$2');
      }
      return env;
    }
  }
  throw new Error('no `npm start` command in a fenced block of this page');
}
