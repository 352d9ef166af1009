/**
 * docs/security.md stays true: every test it cites (`file` › "test name") exists, so a renamed
 * or deleted test cannot leave a threat claimed as proven by nothing.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../helpers/server-process.ts';

const doc = readFileSync(join(REPO_ROOT, 'docs', 'security.md'), 'utf8');

/** [file, quoted test name] pairs: in each table cell, quoted names follow the file they belong to. */
function citations(): [string, string][] {
  const out: [string, string][] = [];
  for (const line of doc.split('\n')) {
    if (!line.startsWith('|')) continue;
    for (const cell of line.split(' | ')) {
      let file: string | null = null;
      for (const m of cell.matchAll(/`((?:test|src)\/[^`]+\.ts)`|"([^"]+)"/g)) {
        if (m[1]) file = m[1];
        else if (file && m[2]) out.push([file, m[2]]);
      }
    }
  }
  return out;
}

describe('docs/security.md', () => {
  const cited = citations();

  it('cites many tests, across the new folder and the existing suites', () => {
    expect(cited.length).toBeGreaterThan(60);
    const files = new Set(cited.map(([f]) => f));
    expect([...files].filter((f) => f.startsWith('test/security/')).length).toBeGreaterThanOrEqual(6);
    expect(files.size).toBeGreaterThan(15);
  });

  it('every cited test file exists and holds every cited test name', () => {
    const missing: string[] = [];
    for (const [file, name] of cited) {
      const path = join(REPO_ROOT, file);
      if (!existsSync(path)) {
        missing.push(`${file} (no such file)`);
        continue;
      }
      const source = readFileSync(path, 'utf8');
      // "..." elides part of a long name and %s stands for a parameter: each remaining piece must be there.
      const pieces = name
        .split(/\.\.\.|%s/)
        .map((p) => p.trim())
        .filter((p) => p.length >= 3);
      expect(pieces.length, `${file}: "${name}"`).toBeGreaterThan(0);
      for (const piece of pieces) if (!source.includes(piece)) missing.push(`${file}: "${piece}"`);
    }
    expect(missing).toEqual([]);
  });
});
