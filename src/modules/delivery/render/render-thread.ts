/**
 * Body of a render thread: builds and DKIM-signs messages handed over by the RenderPool.
 * Rendering (substitution, MIME, RSA-2048 signature) is pure CPU work, so it runs here, off the
 * event loop that drives the SMTP sessions and the database.
 */
import { parentPort } from 'node:worker_threads';
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
  | { id: number; ok: false; error: string };

const port = parentPort;
if (!port) throw new Error('render-thread.ts must run in a worker thread');

port.on('message', (req: RenderThreadRequest) => {
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
});
port.postMessage({ ready: true });
