import { generateKeyPair } from 'node:crypto';
import { promisify } from 'node:util';

const generateKeyPairAsync = promisify(generateKeyPair);

export interface DkimKey {
  privateKeyPem: string;
  publicKeyBase64: string;
}

/**
 * RSA-2048 key generation for new sending domains, ONE AT A TIME for the whole process.
 *
 * crypto.generateKeyPair runs on libuv's thread pool (4 threads by default), the same pool as
 * scrypt (SMTP AUTH, dashboard sign-in), dns.lookup and file I/O, and the pool serves jobs in
 * arrival order. 40 domains created at once queued 40 key generations ahead of every AUTH, which
 * then took 12 s. Queued here instead, key generations hold at most one pool thread; the others
 * stay free for everyone else. Creating many domains only gets slower, never anyone else.
 */
let tail: Promise<unknown> = Promise.resolve();
let waiting = 0;

async function generate(): Promise<DkimKey> {
  const { privateKey, publicKey } = await generateKeyPairAsync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'der' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  return { privateKeyPem: privateKey, publicKeyBase64: publicKey.toString('base64') };
}

export function generateDkimKey(): Promise<DkimKey> {
  waiting++;
  const run = tail.then(generate, generate).finally(() => {
    waiting--;
  });
  tail = run.catch(() => undefined);
  return run;
}

/** Key generations queued or running in this process (metrics, tests). */
export function keyGenerationsPending(): number {
  return waiting;
}
