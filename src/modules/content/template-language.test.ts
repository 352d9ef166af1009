import fc from 'fast-check';
import Handlebars from 'handlebars';
import { describe, expect, it } from 'vitest';
import {
  checkSyntax,
  expressionCount,
  MAX_EACH_ITERATIONS,
  MAX_EXPRESSIONS,
  RenderError,
  renderPart,
  withRenderBudget,
} from './template-language.ts';

const render = (source: string, data: Record<string, unknown>, escaping: 'html' | 'none' = 'none') =>
  renderPart('text', `unit:${source}`, source, data, escaping);

describe('the template language', () => {
  const data = { first: 'Ann', user: { plan: { name: 'Pro' } }, n: 3, tag: '<b>&"\'' };

  it('replaces variables with optional spaces and nested lookups', () => {
    expect(render('Hi {{first}}, {{ user.plan.name }} x{{n}}', data)).toBe('Hi Ann, Pro x3');
  });

  it('renders missing and prototype lookups empty', () => {
    expect(
      render('[{{missing}}][{{user.nope.deeper}}][{{constructor}}][{{__proto__}}][{{first.constructor}}]', data),
    ).toBe('[][][][][]');
  });

  it('escapes {{x}} for html only; {{{x}}} is raw everywhere', () => {
    expect(render('{{tag}}', data)).toBe('<b>&"\'');
    expect(render('{{tag}}|{{{tag}}}', data, 'html')).toBe('&lt;b&gt;&amp;&quot;&#x27;|<b>&"\'');
  });

  it('reports syntax errors with their line; source without {{ is its own rendering', () => {
    expect(checkSyntax('a\nb\n{{#if x}}')).toMatchObject({ line: 3 });
    expect(checkSyntax('{{> partial}}')).toMatchObject({ line: 1, message: 'partials are not supported' });
    expect(render('no variables {single}', data)).toBe('no variables {single}');
  });

  it('stops nested loops past the iteration budget with a RenderError', () => {
    const list = Array.from({ length: 100 }, (_, i) => i);
    const nested = '{{#each l}}{{#each @root.l}}{{#each @root.l}}.{{/each}}{{/each}}{{/each}}';
    expect(100 ** 3).toBeGreaterThan(MAX_EACH_ITERATIONS);
    // A generous time budget: on a loaded machine the 250 ms default could run out first.
    const withinTime = () => withRenderBudget(() => render(nested, { l: list }), 60_000);
    expect(withinTime).toThrow(RenderError);
    expect(withinTime).toThrow(/^render_failed: text: more than 100000 #each iterations/);
  });
});

describe('render budgets (output, time, expressions)', () => {
  it('stops a loop that appends a large value long before the process grows: output is metered as it grows', () => {
    // {{#each l}}{{@root.s}}{{/each}} with 100 KB x 100,000 iterations: 10 GB if nothing stops it.
    const data = { l: Array.from({ length: 100_000 }, () => 0), s: 'y'.repeat(100_000) };
    const before = process.memoryUsage().rss;
    const started = performance.now();
    expect(() => render('{{#each l}}{{@root.s}}{{/each}}', data)).toThrow(
      /^render_failed: text: rendered part is larger than 5 MB/,
    );
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(process.memoryUsage().rss - before).toBeLessThan(200 * 1024 * 1024);
  });

  it('counts text between expressions too: a loop over a large static body stops at 5 MB', () => {
    const body = `{{#each l}}${'z'.repeat(10_000)}{{/each}}`;
    expect(() => render(body, { l: Array.from({ length: 1_000 }, () => 0) })).toThrow(/larger than 5 MB/);
  });

  it('stops a render that runs past its time budget even when it appends nothing', () => {
    // 400 iterations of 1,990 lookups that render empty: work the size limit never sees.
    const source = `{{#each l}}${'{{x}}'.repeat(1_990)}{{/each}}`;
    const data = { l: Array.from({ length: 400 }, () => 0), x: '' };
    // With little data it renders within the default budget (and is compiled: compiling is
    // bounded by MAX_EXPRESSIONS and does not count against a render's time).
    expect(render(source, { l: [0], x: '' })).toBe('');
    const started = performance.now();
    expect(() => withRenderBudget(() => render(source, data), 50)).toThrow(
      /^render_failed: text: rendering took longer than 50 ms/,
    );
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it('refuses more than MAX_EXPRESSIONS expressions in a part before parsing it', () => {
    const started = performance.now();
    const problem = checkSyntax('{{x}}'.repeat(100_000));
    expect(performance.now() - started).toBeLessThan(200);
    expect(problem).toEqual({
      line: 1,
      message: `too many expressions: 100000 {{...}} (at most ${MAX_EXPRESSIONS} per part)`,
    });
    expect(expressionCount('{{a}} {{{b}}} {{#if c}}{{/if}}')).toBe(4);
    expect(checkSyntax('{{x}}'.repeat(MAX_EXPRESSIONS))).toBeNull();
  });

  it('renders exactly what Handlebars renders (metering changes no output)', () => {
    const plain = Handlebars.create();
    const leaf = fc.oneof(
      fc.constantFrom('{{a}}', '{{{a}}}', '{{b.c}}', '{{@index}}', '{{@root.a}}', '{{this}}', '{{../a}}', '{{n}}'),
      fc.string({ maxLength: 8 }).map((s) => s.replace(/[{}\\]/g, '')),
    );
    const tree: fc.Arbitrary<string> = fc.letrec<{ node: string }>((tie) => ({
      node: fc.oneof(
        { depthSize: 'small', withCrossShrink: true },
        leaf,
        fc.array(tie('node'), { maxLength: 4 }).map((xs) => xs.join('')),
        fc
          .tuple(
            fc.constantFrom('if', 'unless', 'each', 'with'),
            fc.constantFrom('a', 'l', 'b', 'n', 'z'),
            tie('node'),
            fc.option(tie('node')),
          )
          .map(([h, v, body, other]) => `{{#${h} ${v}}}${body}${other === null ? '' : `{{else}}${other}`}{{/${h}}}`),
      ),
    })).node;
    const data = { a: 'A<&>', b: { c: 'C' }, l: ['x', 'y<', { a: 'inner' }], n: 0, z: null };
    let i = 0;
    fc.assert(
      fc.property(tree, fc.constantFrom<'html' | 'none'>('html', 'none'), (source, escaping) => {
        let expected: string;
        try {
          expected = plain.compile(source, { knownHelpersOnly: true, strict: false, noEscape: escaping === 'none' })(
            data,
          );
        } catch {
          return; // what Handlebars refuses is checkSyntax's business
        }
        expect(renderPart('html', `diff:${i++}`, source, data, escaping)).toBe(expected);
      }),
      { numRuns: 300 },
    );
  });
});
