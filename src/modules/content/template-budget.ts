/**
 * The budgets no template can escape (docs/templates.md "Limits"), wherever it renders: a render
 * thread, the template check thread, or inline. Handlebars has no hook for "output grew" or "time
 * passed", so our environment's compilers are extended the way Handlebars documents
 * (`env.JavaScriptCompiler = ...`): every leaf append of a compiled template goes through a
 * meter, and #each counts its iterations. A budget that runs out throws, which ends the render:
 * the caller turns it into a RenderError naming the part.
 */
import type Handlebars from 'handlebars';

export const MAX_EACH_ITERATIONS = 100_000;
export const MAX_RENDERED_CHARS = 5 * 1024 * 1024;
/**
 * Wall-clock budget of one render (all parts of a message, or one part rendered alone). Checked
 * while the output grows (every 256 appends): a template that loops over large data stops here
 * with a RenderError instead of holding its thread for seconds. Real messages render in well under
 * 10 ms; 100,000 #each iterations of a short body take about 100 ms.
 */
export const RENDER_TIME_BUDGET_MS = 250;
/** The start of a RenderError's detail when the time budget ran out (renderer.ts counts them). */
export const OVER_TIME = 'rendering took longer than';

/** A budget ran out while rendering (output size, iterations, time): never caught by a template. */
export class BudgetExceeded extends Error {}

/**
 * The budget of the render in progress (renders are synchronous, so one at a time per thread):
 * characters appended, appends since the last clock read, #each iterations, and the deadline.
 */
export const budget = { chars: 0, appends: 0, iterations: 0, deadline: 0, ms: RENDER_TIME_BUDGET_MS };

export function overTime(): void {
  if (performance.now() > budget.deadline) throw new BudgetExceeded(`${OVER_TIME} ${budget.ms} ms`);
}

/**
 * Counts what a template appends to its output: every text between expressions and every value a
 * `{{x}}` / `{{{x}}}` writes (not the results of block helpers, whose insides were counted as
 * they were appended). Compiled templates call it through the helpers object under a name no
 * template can write (it has a space), see meterEnvironment.
 */
const METER = 'postyard meter';
/** What appending a non-string writes (an object without a prototype cannot be written: 0). */
function lengthAsText(value: unknown): number {
  try {
    return String(value).length;
  } catch {
    return 0;
  }
}

function meter(value: unknown, staticLength?: unknown): unknown {
  const n =
    typeof staticLength === 'number'
      ? staticLength
      : typeof value === 'string'
        ? value.length
        : value == null
          ? 0
          : lengthAsText(value);
  budget.chars += n;
  if (budget.chars > MAX_RENDERED_CHARS) throw new BudgetExceeded('rendered part is larger than 5 MB');
  if ((++budget.appends & 255) === 0) overTime();
  return value;
}
const METER_CALL = `helpers[${JSON.stringify(METER)}].count`;

type OpcodeCompiler = {
  opcodes: { opcode: string; args: unknown[] }[];
  opcode(name: string, ...args: unknown[]): void;
};
type JsCompiler = {
  popStack(): unknown;
  push(expr: unknown): void;
  pushSource(source: unknown): void;
};
type StatementCompiler = (this: OpcodeCompiler, node: unknown) => void;

/**
 * Puts the budgets into a Handlebars environment: the meter, the extended compilers and the
 * counting #each. The opcode compiler marks each leaf append (a mustache's value, a text between
 * expressions), the JavaScript compiler wraps it in a call of the meter: output cannot grow, in
 * any part or loop, without the budget seeing it as it grows.
 */
export function meterEnvironment(env: typeof Handlebars): void {
  // Registered as an object, not a function: Handlebars wraps every function helper to hand it an
  // options argument (per call), and leaves anything else as it is.
  env.registerHelper(METER, { count: meter } as unknown as Handlebars.HelperDelegate);

  const internals = env as unknown as { Compiler: new () => object; JavaScriptCompiler: new () => object };
  const BaseCompiler = internals.Compiler;
  const base = BaseCompiler.prototype as Record<string, StatementCompiler>;
  const baseMustache = base.MustacheStatement as StatementCompiler;
  const baseContent = base.ContentStatement as StatementCompiler;
  class MeteredCompiler extends BaseCompiler {}
  Object.assign(MeteredCompiler.prototype, {
    compiler: MeteredCompiler,
    MustacheStatement(this: OpcodeCompiler, mustache: unknown) {
      baseMustache.call(this, mustache);
      // The last opcode is append / appendEscaped: meter the value on the stack just before it.
      const last = this.opcodes.pop();
      if (last) {
        this.opcode('meterTop');
        this.opcodes.push(last);
      }
    },
    ContentStatement(this: OpcodeCompiler, content: { value?: unknown }) {
      if (typeof content.value === 'string' && content.value) this.opcode('meterContent', content.value.length);
      baseContent.call(this, content);
    },
  });
  class MeteredJavaScriptCompiler extends internals.JavaScriptCompiler {}
  Object.assign(MeteredJavaScriptCompiler.prototype, {
    compiler: MeteredJavaScriptCompiler,
    meterTop(this: JsCompiler) {
      this.push([`${METER_CALL}(`, this.popStack(), ')']);
    },
    meterContent(this: JsCompiler, length: number) {
      this.pushSource(`${METER_CALL}(null, ${Number(length)});`);
    },
  });
  internals.Compiler = MeteredCompiler;
  internals.JavaScriptCompiler = MeteredJavaScriptCompiler;

  const builtinEach = env.helpers.each as Handlebars.HelperDelegate;
  // #each counts its iterations (MAX_EACH_ITERATIONS) and reads the clock every 256 of them: a
  // loop whose body appends nothing still cannot run past the deadline.
  env.registerHelper('each', function (this: unknown, context: unknown, options: Handlebars.HelperOptions) {
    if (!options) return builtinEach.call(this, context);
    const fn = options.fn;
    const counted = ((ctx: unknown, o: unknown) => {
      if (++budget.iterations > MAX_EACH_ITERATIONS)
        throw new BudgetExceeded(`more than ${MAX_EACH_ITERATIONS} #each iterations`);
      if ((budget.iterations & 255) === 0) overTime();
      return fn(ctx, o as Handlebars.RuntimeOptions);
    }) as Handlebars.TemplateDelegate;
    return builtinEach.call(this, context, { ...options, fn: counted });
  });
}

/** Resets the counters of one part (the deadline is the whole render's). */
export function startPart(): void {
  budget.chars = 0;
  budget.appends = 0;
  budget.iterations = 0;
}

/**
 * Runs `render` under one render budget (RENDER_TIME_BUDGET_MS from now): renderContent renders
 * all parts of a message under one. A renderPart called outside it has a budget of its own.
 */
export function withRenderBudget<T>(render: () => T, ms: number = RENDER_TIME_BUDGET_MS): T {
  const outer = { deadline: budget.deadline, ms: budget.ms };
  budget.deadline = performance.now() + ms;
  budget.ms = ms;
  try {
    return render();
  } finally {
    budget.deadline = outer.deadline;
    budget.ms = outer.ms;
  }
}
