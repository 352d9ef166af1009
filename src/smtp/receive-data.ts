import type { SMTPServerDataStream } from 'smtp-server';
import type { SubmissionServer } from './connection.ts';
import { reply, type SmtpReply } from './replies.ts';

/** Per-chunk rewriting of the data as it arrives (src/lib/line-ends.ts CrlfStream). */
export interface ChunkTransform {
  push(chunk: Buffer): Buffer;
  end(): Buffer;
}

/** What the end of DATA is answered with: a refusal, or the text of the 250. */
export type DataAnswer = { refused: SmtpReply } | { ok: string };

/**
 * The DATA phase every Postyard listener shares: collects the message (nothing past the size
 * limit is kept: the rest is read and dropped), then hands it to `handle` (null when it was too
 * big) and answers with what that gives back. While the answer is pending the connection counts
 * as storing (no progress deadline); once answered during a shutdown, the session is told to go.
 */
export function receiveData(
  server: SubmissionServer,
  sessionId: string,
  stream: SMTPServerDataStream,
  callback: (err?: Error | null, message?: string) => void,
  handle: (message: Buffer | null) => Promise<DataAnswer>,
  transform?: ChunkTransform,
): void {
  const conn = server.connectionOf(sessionId);
  const chunks: Buffer[] = [];
  stream.on('data', (chunk: Buffer) => {
    if (stream.sizeExceeded) chunks.length = 0;
    else chunks.push(transform ? transform.push(chunk) : chunk);
  });
  // The client went away mid-message: smtp-server destroys the stream; nothing to answer.
  stream.on('error', () => {});
  stream.on('end', () => {
    if (conn) conn.storing = true;
    const finish = (answer: DataAnswer) => {
      if (conn) conn.storing = false;
      if ('refused' in answer) callback(answer.refused);
      else callback(null, answer.ok);
      conn?.progress();
      // Shutting down: the transaction is answered, now the session may go.
      if (server.stopping && conn) setImmediate(() => conn.send(421, '4.3.2 Server shutting down, try again later'));
    };
    if (!stream.sizeExceeded && transform) chunks.push(transform.end());
    // handle() answers its own failures; a rejection is the last guard against an unanswered DATA.
    handle(stream.sizeExceeded ? null : Buffer.concat(chunks)).then(finish, () =>
      finish({ refused: reply.tempFailure() }),
    );
  });
}
