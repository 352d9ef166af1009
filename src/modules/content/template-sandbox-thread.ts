/**
 * Body of a template sandbox thread (template-sandbox.ts): syntax checks and preview renders of
 * tenants' templates, off the event loop that serves every request. The template language's own
 * budgets apply here as everywhere; the pool's time and heap limits catch what they do not.
 */
import { parentPort } from 'node:worker_threads';
import { checkSyntax, RenderError } from './template-language.ts';
import { THREAD_READY, type ThreadReply } from '../../lib/timed-worker-pool.ts';
import { type RenderKeys, renderContent } from './render-content.ts';
import type { ContentFields } from './stored-content.ts';

export type SandboxJob =
  | { kind: 'syntax'; sources: string[] }
  | { kind: 'render'; content: ContentFields; data: Record<string, unknown>; keys: RenderKeys };

export type SandboxRenderResult =
  | { ok: ReturnType<typeof renderContent> }
  | { renderError: { part: string; detail: string } };

if (!parentPort) throw new Error('template-sandbox-thread.ts must run in a worker thread');
const port = parentPort;

function handle(job: SandboxJob): unknown {
  if (job.kind === 'syntax') return job.sources.map((s) => checkSyntax(s));
  try {
    return { ok: renderContent(job.content, job.data, job.keys) } satisfies SandboxRenderResult;
  } catch (err) {
    if (err instanceof RenderError) return { renderError: { part: err.part, detail: err.detail } };
    throw err;
  }
}

port.on('message', (m: { id: number; job: SandboxJob }) => {
  let reply: ThreadReply;
  try {
    reply = { id: m.id, result: handle(m.job) };
  } catch (err) {
    reply = { id: m.id, error: err instanceof Error ? err.message : String(err) };
  }
  port.postMessage(reply);
});

port.postMessage(THREAD_READY);
