import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkLayers, layerProblems, roomOf, UPWARD_BUDGET } from '../../scripts/check-layers.ts';

/**
 * The layering rule of docs/ARCHITECTURE.md "Layers", held against the code: scripts/check-layers.ts
 * reads every import of src/. The second half runs the same check on small made-up trees, so
 * a check that can no longer see a cycle or an upward arrow fails here too.
 */
const ROOT = resolve(import.meta.dirname, '../..');

describe('the layers of src/', () => {
  const report = checkLayers(ROOT);

  it('every room has a layer, no feature module imports one that imports it back, few arrows run up', () => {
    expect(layerProblems(report)).toEqual([]);
    expect(report.upward.length).toBeLessThanOrEqual(UPWARD_BUDGET);
    expect(report.upward.length).toBeLessThan(20);
  });

  it('no feature module, no engine and no part of src/http/ knows the container', () => {
    const knowing = report.arrows.filter(
      (a) => a.to === 'container.ts' && (a.from.startsWith('modules/') || a.from === 'http' || a.from === 'jobs'),
    );
    expect(knowing.filter((a) => a.from !== 'modules/index.ts').map((a) => a.files)).toEqual([]);
  });

  it('isPostgres() is called only under src/db/ and in the container', () => {
    const callers = report.dialectTests.filter((f) => !f.startsWith('src/db/') && f !== 'src/container.ts');
    expect(callers).toEqual([]);
  });
});

describe('the layer check itself', () => {
  const made: string[] = [];
  afterAll(() => {
    for (const dir of made) rmSync(dir, { recursive: true, force: true });
  });

  function tree(files: Record<string, string>): string {
    const dir = mkdtempSync(join(tmpdir(), 'postyard-layers-'));
    made.push(dir);
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(dir, 'src', path)), { recursive: true });
      writeFileSync(join(dir, 'src', path), text);
    }
    return dir;
  }

  it('names rooms: a folder of src/, a feature module, a file at the top', () => {
    expect(roomOf('db/index.ts')).toBe('db');
    expect(roomOf('modules/webhooks/sender.ts')).toBe('modules/webhooks');
    expect(roomOf('modules/index.ts')).toBe('modules/index.ts');
    expect(roomOf('container.ts')).toBe('container.ts');
  });

  it('sees two feature modules that import each other, also through a type or a third module', () => {
    const dir = tree({
      'modules/a/a.ts': "import type { B } from '../b/b.ts';\nexport type A = B;\n",
      'modules/b/b.ts': "import { c } from '../c/c.ts';\nexport type B = string;\nexport const b = c;\n",
      'modules/c/c.ts': "export const c = 1;\nexport async function load() { return import('../a/a.ts'); }\n",
      'modules/d/d.ts': "import { c } from '../c/c.ts';\nexport const d = c;\n",
    });
    const r = checkLayers(dir);
    expect(r.moduleCycles).toEqual([['modules/a', 'modules/b', 'modules/c']]);
    expect(layerProblems(r)).toContain('feature modules import each other: modules/a, modules/b, modules/c');
  });

  it('counts an import from a lower layer to a higher one, and refuses a room in no layer', () => {
    const dir = tree({
      'lib/x.ts': "import { Y } from '../db/y.ts';\nexport const x = Y;\n",
      'db/y.ts': "export const Y = 1;\nexport { isPostgres } from './dialect.ts';\n",
      'modules/m/m.ts': "import { isPostgres } from '../../db/y.ts';\nexport const pg = (d: never) => isPostgres(d);\n",
      'attic/old.ts': 'export const old = 1;\n',
    });
    const r = checkLayers(dir);
    expect(r.upward.map((a) => `${a.from} -> ${a.to}`)).toEqual(['lib -> db']);
    expect(r.unplaced).toEqual(['attic']);
    expect(r.dialectTests).toEqual(['src/modules/m/m.ts']);
  });
});
