/**
 * Body of a render thread: builds and DKIM-signs messages handed over by the RenderPool.
 * Rendering (substitution, MIME, RSA-2048 signature) is pure CPU work, so it runs here, off the
 * event loop that drives the SMTP sessions and the database.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { type RenderRequest, renderMessage } from './renderer.ts';

export interface RenderThreadRequest extends RenderRequest {
  id: number;
}

export type RenderThreadReply =
  | {
      id: number;
      ok: true;
      envelopeFrom: string;
      raw: Uint8Array;
      signed: boolean;
      renderMs?: number | undefined;
      dkimMs?: number | undefined;
    }
  | { id: number; ok: false; error: string }
  /** Sent as a request starts: the pool's watchdog blames the last one started if the thread stalls. */
  | { started: number };

if (!parentPort) throw new Error('render-thread.ts must run in a worker thread');
const port = parentPort;

/** What the pool tells a thread (render-pool.ts): how many requests may start per event-loop turn. */
export interface RenderThreadData {
  /** 0: each request starts as its message arrives, as before (the bench's baseline). */
  startsPerTurn: number;
}

/**
 * At most startsPerTurn requests start per event-loop turn, in the order they came. Started as
 * their messages arrived, a busy thread rendered in one go every request that came while it did
 * (Node delivers up to 1,000 port messages per turn, and a message whose transmission's body is
 * kept renders synchronously, so its reply brings the next request in the same turn), while
 * composing a new transmission's body (MailComposer: stream steps, 3 to 20 turns) advanced one
 * step per turn: with 40 renders in hand, a password reset's first message waited 0.4 to 1.7 s
 * behind 1,300 to 2,800 renders of a bulk sender's mail (test/pacing/fairness.test.ts failed in
 * CI so; bench/render-turns.ts). Now a compose in progress takes a step every 16 starts.
 */
const { startsPerTurn } = workerData as RenderThreadData;
const waiting: RenderThreadRequest[] = [];
let head = 0;
/** Starts left until the next turn: a message that finds the budget and no one waiting starts at once. */
let budget = startsPerTurn;
let turning = false;

/** Once per event-loop turn while there is work: a new budget, spent on the longest waiting first. */
function turn(): void {
  budget = startsPerTurn;
  while (budget > 0 && head < waiting.length) {
    budget--;
    render(waiting[head++] as RenderThreadRequest);
  }
  if (head === waiting.length || head > 4096) {
    waiting.splice(0, head);
    head = 0;
  }
  turning = head < waiting.length || budget < startsPerTurn;
  if (turning) setImmediate(turn);
}

port.on('message', (req: RenderThreadRequest) => {
  if (startsPerTurn <= 0) return render(req);
  if (budget > 0 && head === waiting.length) {
    budget--;
    render(req);
  } else waiting.push(req);
  if (!turning) {
    turning = true;
    setImmediate(turn);
  }
});

function render(req: RenderThreadRequest): void {
  port.postMessage({ started: req.id } satisfies RenderThreadReply);
  renderMessage(req.msg, req.tx, req.key, req.verpToken, req.bounceHost).then(
    (r) => {
      const raw = new Uint8Array(r.raw.buffer, r.raw.byteOffset, r.raw.byteLength);
      // Transfer the bytes instead of copying them when the Buffer owns its whole ArrayBuffer
      // (small Buffers share Node's pool and must be copied).
      const owns = raw.byteOffset === 0 && raw.byteLength === raw.buffer.byteLength;
      const reply: RenderThreadReply = {
        id: req.id,
        ok: true,
        envelopeFrom: r.envelopeFrom,
        raw,
        signed: r.signed,
        // Timings travel with the reply: the thread has no registry of its own (mail-metrics.ts).
        renderMs: r.renderMs,
        dkimMs: r.dkimMs,
      };
      port.postMessage(reply, owns ? [raw.buffer as ArrayBuffer] : []);
    },
    (err: unknown) => {
      const reply: RenderThreadReply = {
        id: req.id,
        ok: false,
        error: err instanceof Error ? err.message : String(err),
      };
      port.postMessage(reply);
    },
  );
}

port.postMessage({ ready: true });
