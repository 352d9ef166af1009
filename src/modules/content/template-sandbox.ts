/**
 * Where tenants' templates are checked and previewed: worker threads with a time and a heap
 * limit (lib/timed-worker-pool.ts), never the event loop that serves every other request. A
 * template of 100,000 expressions held the main thread 5-6 s at save; a preview looping over
 * them held /healthz 15.7 s. Delivery renders run on the render threads (delivery/render/).
 *
 * Syntax results are kept per source (by digest, bounded), so the same content sent again is
 * not checked again: most senders send the same few templates over and over.
 */
import { createHash } from 'node:crypto';
import { BoundedCache } from '../../lib/bounded-cache.ts';
import { RenderError, type SyntaxProblem } from './template-language.ts';
import { JobAbandoned, TimedWorkerPool } from '../../lib/timed-worker-pool.ts';
import type { RenderedContent, RenderKeys } from './render-content.ts';
import type { ContentFields } from './stored-content.ts';
import type { SandboxJob, SandboxRenderResult } from './template-sandbox-thread.ts';

/**
 * How long one check (all parts of a content) may take on its thread. Checks are bounded by
 * MAX_EXPRESSIONS (0.1-0.7 s at most on a quiet 2-core machine); the limit is a backstop set with
 * room for a loaded machine, where a legitimate check must not be refused.
 */
export const CHECK_LIMIT_MS = 10_000;
/** How long one preview render may take (the language's own budget is 250 ms, compiling apart). */
export const PREVIEW_LIMIT_MS = 10_000;

const ENTRY = import.meta.url.endsWith('.ts')
  ? new URL('./template-sandbox-entry.js', import.meta.url)
  : new URL('./template-sandbox-thread.js', import.meta.url);

export type Problem = { field: string; message: string };

export class TemplateSandbox {
  private readonly pool: TimedWorkerPool;
  private readonly checked = new BoundedCache<string, { problem: SyntaxProblem | null }>(5_000);

  constructor(threads = 2) {
    this.pool = new TimedWorkerPool({ entry: ENTRY, size: threads, limitMs: CHECK_LIMIT_MS, maxHeapMb: 256 });
  }

  /** Jobs abandoned (time limit, heap limit) since start. */
  get abandoned(): number {
    return this.pool.abandoned;
  }

  /**
   * Syntax problems of named parts, as content-rules reports them (`<field>: line <n>: ...`).
   * Parts without `{{` and parts checked before cost no thread.
   */
  async syntaxProblems(parts: Record<string, string | null | undefined>): Promise<Problem[]> {
    const fields = Object.entries(parts).filter((e): e is [string, string] => typeof e[1] === 'string');
    const results = new Map<string, SyntaxProblem | null>();
    const unknown: string[] = [];
    for (const [, source] of fields) {
      if (!source.includes('{{')) continue;
      const digest = digestOf(source);
      const known = this.checked.get(digest);
      if (known !== undefined) results.set(source, known.problem);
      else if (!unknown.includes(source)) unknown.push(source);
    }
    if (unknown.length > 0) {
      try {
        const found = await this.pool.run<(SyntaxProblem | null)[]>({
          kind: 'syntax',
          sources: unknown,
        } satisfies SandboxJob);
        unknown.forEach((source, i) => {
          const p = found[i] ?? null;
          this.checked.set(digestOf(source), { problem: p });
          results.set(source, p);
        });
      } catch (err) {
        if (!(err instanceof JobAbandoned)) throw err;
        // Not remembered: a thread stopped for another reason (memory) would otherwise stay an answer.
        const message =
          err.reason === 'timeout'
            ? `the template could not be checked within ${CHECK_LIMIT_MS / 1000} s (simplify it)`
            : 'the template is too large to check';
        for (const source of unknown) results.set(source, { line: 1, message });
      }
    }
    const out: Problem[] = [];
    for (const [field, source] of fields) {
      const p = results.get(source);
      if (p) out.push({ field, message: `${field}: line ${p.line}: ${p.message}` });
    }
    return out;
  }

  /** Renders content for a preview; throws RenderError like renderContent (also on the time limit). */
  async render(content: ContentFields, data: Record<string, unknown>, keys: RenderKeys): Promise<RenderedContent> {
    let r: SandboxRenderResult;
    try {
      r = await this.pool.run<SandboxRenderResult>(
        { kind: 'render', content, data, keys } satisfies SandboxJob,
        PREVIEW_LIMIT_MS,
      );
    } catch (err) {
      if (!(err instanceof JobAbandoned)) throw err;
      throw new RenderError(
        'content',
        err.reason === 'timeout'
          ? `rendering took longer than ${PREVIEW_LIMIT_MS / 1000} s`
          : 'rendering ran out of memory',
      );
    }
    if ('renderError' in r) throw new RenderError(r.renderError.part, r.renderError.detail);
    return r.ok;
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}

function digestOf(source: string): string {
  return createHash('sha256').update(source).digest('base64url');
}

/**
 * The process's sandbox: started on first use (its threads do not keep the process alive), shared
 * by every caller, since checks and previews hold no state of a tenant.
 */
export const templateSandbox = new TemplateSandbox();
