/**
 * The layering rule of src/ (docs/ARCHITECTURE.md "Layers"), checked from the code's own imports:
 *
 * - src/ is made of rooms: each folder of src/ (src/db/, src/http/, ...), each feature module
 *   (src/modules/<name>/) and each file at the top of src/ or of src/modules/;
 * - every room has a layer (LAYERS, lowest first); an import from a room to a room of a higher
 *   layer is an upward arrow: at most UPWARD_BUDGET remain, each listed by this script;
 * - no feature module imports, directly or through other modules, a module that imports it back;
 * - only src/db/ and the container ask which database runs (`isPostgres()`): a module gets a
 *   strategy chosen once in the container, or a capability of src/db/ named for what it means.
 *
 * Type-only and dynamic imports count like the others: a type names what a room knows of
 * another. Tests are not rooms. `node --import tsx scripts/check-layers.ts` prints the arrows
 * that run up and the module cycles, and exits 1 when a rule is broken (CI runs it through
 * test/foundation/layers.test.ts).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

/** Lowest first. `modules/*` is every feature module; a room in no layer is an error. */
export const LAYERS: readonly (readonly string[])[] = [
  ['lib', 'logger.ts', 'engine.ts'],
  ['config', 'config.ts'],
  ['db', 'metrics'],
  ['jobs', 'rate-limit', 'idempotency'],
  ['http', 'mail'],
  ['modules/*'],
  ['container.ts'],
  ['modules/index.ts', 'app.ts', 'smtp', 'release-claims.ts'],
  ['roles.ts'],
  ['cli'],
];

/** Upward arrows allowed; lower it as they go, never raise it. */
export const UPWARD_BUDGET = 0;

export interface Arrow {
  from: string;
  to: string;
  /** The importing files, relative to the repository root. */
  files: string[];
}

export interface LayerReport {
  rooms: string[];
  arrows: Arrow[];
  upward: Arrow[];
  /** Rooms in no layer. */
  unplaced: string[];
  /** Groups of feature modules that import each other, directly or round a loop. */
  moduleCycles: string[][];
  /** Files that ask which database runs (`isPostgres(`), relative to the repository root. */
  dialectTests: string[];
}

const IMPORT =
  /(?:^|[\s;])(?:import|export)\s+(?:type\s+)?(?:[^'";]*?\sfrom\s+)?['"](\.{1,2}\/[^'"]+)['"]|import\(\s*['"](\.{1,2}\/[^'"]+)['"]\s*\)/g;

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...sourceFiles(p));
    else if (/\.(ts|js)$/.test(e.name) && !/\.test\.ts$/.test(e.name)) out.push(p);
  }
  return out;
}

/** The room of a file of src/ (path relative to src/). */
export function roomOf(rel: string): string {
  const parts = rel.split('/');
  if (parts[0] === 'modules' && parts.length > 2) return `modules/${parts[1]}`;
  if (parts.length > 1 && parts[0] !== 'modules') return parts[0] as string;
  return rel;
}

function layerOf(room: string): number {
  const key = room.startsWith('modules/') && !room.endsWith('.ts') ? 'modules/*' : room;
  return LAYERS.findIndex((names) => names.includes(key));
}

/** Strongly connected groups (Tarjan) of more than one node. */
function cycles(nodes: readonly string[], next: (n: string) => readonly string[]): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let counter = 0;
  const visit = (v: string) => {
    index.set(v, counter);
    low.set(v, counter++);
    stack.push(v);
    onStack.add(v);
    for (const w of next(v)) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v) as number, index.get(w) as number));
    }
    if (low.get(v) === index.get(v)) {
      const group: string[] = [];
      let w: string;
      do {
        w = stack.pop() as string;
        onStack.delete(w);
        group.push(w);
      } while (w !== v);
      if (group.length > 1) found.push(group.sort());
    }
  };
  for (const n of nodes) if (!index.has(n)) visit(n);
  return found;
}

export function checkLayers(root: string): LayerReport {
  const src = join(root, 'src');
  const byPair = new Map<string, Arrow>();
  const rooms = new Set<string>();
  const dialectTests: string[] = [];
  for (const file of sourceFiles(src)) {
    const from = roomOf(relative(src, file));
    rooms.add(from);
    const text = readFileSync(file, 'utf8');
    if (/\bisPostgres\(/.test(text)) dialectTests.push(relative(root, file));
    for (const m of text.matchAll(IMPORT)) {
      const target = resolve(dirname(file), (m[1] ?? m[2]) as string);
      const rel = relative(src, target);
      if (rel.startsWith('..')) continue;
      const to = roomOf(rel);
      if (to === from) continue;
      const key = `${from} -> ${to}`;
      const arrow = byPair.get(key) ?? { from, to, files: [] };
      arrow.files.push(relative(root, file));
      byPair.set(key, arrow);
    }
  }
  const arrows = [...byPair.values()].sort((a, b) => `${a.from}${a.to}`.localeCompare(`${b.from}${b.to}`));
  const all = [...rooms].sort();
  const unplaced = all.filter((r) => layerOf(r) < 0);
  const upward = arrows.filter((a) => layerOf(a.from) >= 0 && layerOf(a.from) < layerOf(a.to));
  const features = all.filter((r) => r.startsWith('modules/') && !r.endsWith('.ts'));
  const moduleCycles = cycles(features, (n) =>
    arrows.filter((a) => a.from === n && features.includes(a.to)).map((a) => a.to),
  );
  return { rooms: all, arrows, upward, unplaced, moduleCycles, dialectTests: dialectTests.sort() };
}

/** The rule's verdict in lines; empty when the rules hold. */
export function layerProblems(r: LayerReport): string[] {
  const problems: string[] = [];
  for (const room of r.unplaced) problems.push(`${room} is in no layer: add it to LAYERS in scripts/check-layers.ts`);
  for (const group of r.moduleCycles) problems.push(`feature modules import each other: ${group.join(', ')}`);
  for (const file of r.dialectTests) {
    if (!file.startsWith('src/db/') && file !== 'src/container.ts') {
      problems.push(
        `${file} asks which database runs: choose the strategy in the container, or add a capability to src/db/`,
      );
    }
  }
  if (r.upward.length > UPWARD_BUDGET) {
    problems.push(`${r.upward.length} arrows run up a layer (at most ${UPWARD_BUDGET})`);
  }
  return problems;
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(import.meta.dirname, 'check-layers.ts')) {
  const report = checkLayers(resolve(import.meta.dirname, '..'));
  console.log(`${report.rooms.length} rooms, ${report.arrows.length} arrows, ${report.upward.length} run up a layer:`);
  for (const a of report.upward) console.log(`  ${a.from} -> ${a.to}: ${a.files.join(', ')}`);
  const problems = layerProblems(report);
  for (const p of problems) console.log(`PROBLEM ${p}`);
  process.exit(problems.length ? 1 : 0);
}
