/**
 * The one template language of Postyard (docs/templates.md): stored templates and inline
 * transmission content alike. It is Handlebars (the `handlebars` package), in a private
 * environment locked down to what reads the data it is given:
 *
 * - `{{x}}` is HTML-escaped in html parts and raw in every other part (subject, text, headers),
 *   `{{{x}}}` is always raw; nested paths, `{{#if}}`/`{{else}}`, `{{#unless}}`, `{{#each}}`,
 *   `{{#with}}`.
 * - Prototype access stays off (Handlebars' defaults since 4.6): `{{constructor}}`,
 *   `{{__proto__}}` and friends render empty.
 * - `knownHelpersOnly`: only the built-in block helpers above; `lookup` and `log` are removed,
 *   partials and decorators are refused at parse time (a tenant's template reads only its data).
 * - Missing values render empty (`strict: false`, Handlebars' default).
 * - Limits a template cannot escape: 100,000 `#each` iterations and 5 MB of output per part, so
 *   nested loops over a big array fail that message instead of occupying a render thread.
 *
 * Compiled templates are cached per key (e.g. template id + version + part) in a bounded LRU;
 * a process (or render thread) compiles each version once.
 */
import Handlebars from 'handlebars';
import { BoundedCache } from '../../lib/bounded-cache.ts';
import { budget, MAX_RENDERED_CHARS, meterEnvironment, startPart, withRenderBudget } from './template-budget.ts';

export {
  MAX_EACH_ITERATIONS,
  MAX_RENDERED_CHARS,
  RENDER_TIME_BUDGET_MS,
  withRenderBudget,
} from './template-budget.ts';

export type Escaping = 'html' | 'none';

/**
 * Most `{{...}}` expressions one part may hold. Compiling costs Handlebars 50-300 us per
 * expression (parse, code generation with source-map nodes, `new Function`, much of it garbage
 * collection): 100,000 of them held a thread for 5 s; 2,000 compile in 0.1-0.7 s on a 2-core
 * machine, a cost paid once per template version and thread. Real templates hold tens to a few
 * hundred (repetition is what #each is for). Counted before anything is parsed.
 */
export const MAX_EXPRESSIONS = 2_000;
/** A syntax problem: what a 422 reports as `<part>: line <n>: <message>`. */
export interface SyntaxProblem {
  line: number;
  message: string;
}

export const RENDER_FAILED = 'render_failed: ';

/**
 * A part that could not be rendered with the given data. Its message is the reason the message
 * fails with (`render_failed: <part>: <what>`); it stays recognisable after crossing from a render
 * thread as a plain Error message.
 */
export class RenderError extends Error {
  constructor(
    readonly part: string,
    readonly detail: string,
  ) {
    super(`${RENDER_FAILED}${part}: ${detail}`);
    this.name = 'RenderError';
  }
}

const env = Handlebars.create();
env.unregisterHelper('lookup');
env.unregisterHelper('log');
// Handlebars writes a console warning when a template asks for a prototype property; a tenant's
// template must not be able to write to our logs. Level 4 is above 'error' (the highest).
(env as unknown as { logger: { level: number | string } }).logger.level = 4;

const COMPILE_OPTIONS = {
  knownHelpersOnly: true,
  knownHelpers: { lookup: false, log: false },
  strict: false,
} as const;

meterEnvironment(env);

type Compiled = Handlebars.TemplateDelegate;
const cache = new BoundedCache<string, Compiled>(2000);

/** The node types a template may not use: they read or run something other than the data. */
const FORBIDDEN: Record<string, string> = {
  PartialStatement: 'partials are not supported',
  PartialBlockStatement: 'partials are not supported',
  Decorator: 'decorators are not supported',
  DecoratorBlock: 'decorators are not supported',
};

type AstNode = { type?: string; loc?: { start?: { line?: number } } } & Record<string, unknown>;

/** The first forbidden node in the tree, depth first. */
function forbiddenNode(node: unknown): SyntaxProblem | null {
  if (!node || typeof node !== 'object') return null;
  if (Array.isArray(node)) {
    for (const n of node) {
      const found = forbiddenNode(n);
      if (found) return found;
    }
    return null;
  }
  const n = node as AstNode;
  if (typeof n.type === 'string' && FORBIDDEN[n.type]) {
    return { line: n.loc?.start?.line ?? 1, message: FORBIDDEN[n.type] as string };
  }
  for (const [k, v] of Object.entries(n)) {
    if (k === 'loc' || !v || typeof v !== 'object') continue;
    const found = forbiddenNode(v);
    if (found) return found;
  }
  return null;
}

/** The line an error of Handlebars' parser or compiler points at (1 when it names none). */
function lineOf(err: unknown): number {
  const e = err as { lineNumber?: unknown; message?: unknown };
  if (typeof e.lineNumber === 'number') return e.lineNumber;
  const m = /on line (\d+)/.exec(String(e.message ?? ''));
  return m ? Number(m[1]) : 1;
}

/** Handlebars' message without its position suffix and source excerpt (the line is reported apart). */
function cleanMessage(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  const parse = /^Parse error on line \d+:\n[^\n]*\n[^\n]*\n(.*)$/s.exec(text);
  if (parse) return `syntax error: ${(parse[1] ?? '').replace(/\s+/g, ' ').trim()}`;
  return text
    .replace(/ - \d+:\d+$/, '')
    .replace(
      /^You specified knownHelpersOnly, but used the unknown helper (.*)$/s,
      'unknown helper $1 (only #if, #unless, #each and #with exist)',
    );
}

/** How many `{{` a source holds (a linear scan: it runs before anything is parsed). */
export function expressionCount(source: string): number {
  let n = 0;
  for (let i = source.indexOf('{{'); i !== -1; i = source.indexOf('{{', i + 2)) n++;
  return n;
}

/** Parses and checks a source; throws what a syntax problem reports. */
function parseChecked(source: string): hbs.AST.Program {
  const count = expressionCount(source);
  if (count > MAX_EXPRESSIONS)
    throw new SyntaxFailure(1, `too many expressions: ${count} {{...}} (at most ${MAX_EXPRESSIONS} per part)`);
  const ast = env.parse(source);
  const forbidden = forbiddenNode(ast);
  if (forbidden) throw new SyntaxFailure(forbidden.line, forbidden.message);
  // The opcode compiler finds what parsing does not (unknown helpers); the JavaScript code
  // generation after it can fail on nothing a template can write, so checks stop here.
  const { Compiler } = env as unknown as { Compiler: new () => { compile(ast: unknown, o: unknown): unknown } };
  new Compiler().compile(ast, {
    ...COMPILE_OPTIONS,
    noEscape: true,
  });
  return ast;
}

class SyntaxFailure extends Error {
  constructor(
    readonly lineNumber: number,
    message: string,
  ) {
    super(message);
  }
}

/** Null when `source` is a valid template; else the line and what is wrong there. */
export function checkSyntax(source: string): SyntaxProblem | null {
  if (!source.includes('{{')) return null;
  try {
    parseChecked(source);
    return null;
  } catch (err) {
    return { line: lineOf(err), message: cleanMessage(err) };
  }
}

/**
 * Checks several named parts at once: one `{field, message}` per bad part, e.g.
 * `{field: 'html', message: 'html: line 3: syntax error: ...'}`, ready for validationError().
 */
export function syntaxProblems(parts: Record<string, string | null | undefined>): { field: string; message: string }[] {
  const out: { field: string; message: string }[] = [];
  for (const [field, source] of Object.entries(parts)) {
    if (typeof source !== 'string') continue;
    const p = checkSyntax(source);
    if (p) out.push({ field, message: `${field}: line ${p.line}: ${p.message}` });
  }
  return out;
}

const NO_DATA = Object.freeze({});

function compiled(key: string, source: string, escaping: Escaping): Compiled {
  const cacheKey = `${escaping}\u0000${key}`;
  let fn = cache.get(cacheKey);
  if (!fn) {
    let ast: hbs.AST.Program;
    try {
      ast = parseChecked(source);
    } catch (err) {
      throw new Error(`line ${lineOf(err)}: ${cleanMessage(err)}`);
    }
    // Compiled from the checked tree: the source is parsed once. Handlebars compiles on the first
    // call: make it now, with no data, so that the compiling is not part of a render's time.
    const made = env.compile(ast, { ...COMPILE_OPTIONS, noEscape: escaping === 'none' });
    try {
      withRenderBudget(() => made(NO_DATA), Number.POSITIVE_INFINITY);
    } catch {
      // The render that follows meets the same problem and reports it.
    }
    fn = made;
    cache.set(cacheKey, fn);
  }
  return fn;
}

/**
 * Renders one part. `key` names the source for the compile cache: the same key must always
 * come with the same source (template id + version + part, or transmission id + part).
 * Throws RenderError naming `part`.
 */
export function renderPart(
  part: string,
  key: string,
  source: string,
  data: Record<string, unknown>,
  escaping: Escaping,
): string {
  // Nothing to substitute: the source is its own rendering (and no compile is cached for it).
  if (!source.includes('{{')) return source;
  if (budget.deadline === 0) return withRenderBudget(() => renderPart(part, key, source, data, escaping));
  let out: string;
  try {
    const compiling = performance.now();
    const fn = compiled(`${key}\u0000${part}`, source, escaping);
    // Compiling is bounded by MAX_EXPRESSIONS and paid once per source: it does not count
    // against the render's time, or a large template's first message would fail and its second pass.
    budget.deadline += performance.now() - compiling;
    startPart();
    out = fn(data);
  } catch (err) {
    throw new RenderError(part, err instanceof Error ? cleanMessage(err) : String(err));
  }
  if (out.length > MAX_RENDERED_CHARS) throw new RenderError(part, 'rendered part is larger than 5 MB');
  return out;
}

/** True when any of the sources uses the language (has `{{`); else rendering changes nothing. */
export function usesLanguage(...sources: (string | null | undefined)[]): boolean {
  return sources.some((s) => typeof s === 'string' && s.includes('{{'));
}

/** Forgets every compiled template (tests). */
export function clearCompiledTemplates(): void {
  cache.clear();
}
