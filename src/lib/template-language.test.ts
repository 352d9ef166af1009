import { describe, expect, it } from 'vitest';
import { checkSyntax, MAX_EACH_ITERATIONS, RenderError, renderPart } from './template-language.ts';

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
    expect(() => render(nested, { l: list })).toThrow(RenderError);
    expect(() => render(nested, { l: list })).toThrow(/^render_failed: text: more than 100000 #each iterations/);
  });
});
