/**
 * SMTP fuzzing of the command phase against the real submission server: random and garbage
 * command lines, odd line endings, overlong lines, invalid AUTH payloads, pipelined junk split
 * into arbitrary TCP writes. Every session gets proper SMTP replies and ends with 221 or 421;
 * the server never fails internally, never crashes, and a well-behaved client on another
 * connection sends fine afterwards. (Limits and slow-drip clients: test/smtp/limits.test.ts.)
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mailer, type SmtpSetup, setupSmtp } from '../smtp/helpers.ts';
import { FUZZ_TIMEOUT_MS, fuzzParams } from './harness.ts';
import { checkSession, commandScript, runSession } from './smtp-fuzz.ts';

let s: SmtpSetup;
beforeAll(async () => {
  // Cleartext AUTH saves a TLS handshake per session (STARTTLS itself is still offered and fuzzed).
  s = await setupSmtp({ POSTYARD_SMTP_ALLOW_INSECURE_AUTH: 'true', POSTYARD_SMTP_IDLE_TIMEOUT_SECONDS: '10' });
});
afterAll(async () => {
  await s?.close();
});

async function wellBehavedClientSends(): Promise<void> {
  const t = mailer(s.smtp.port, s.cred);
  try {
    const info = await t.sendMail({
      from: 'shop@example.com',
      to: 'ann@example.com',
      subject: 'after fuzz',
      text: 'x',
    });
    expect(info.response).toMatch(/^250 2\.0\.0 Ok: queued as /);
  } finally {
    t.close();
  }
}

describe('SMTP command fuzzing', () => {
  it(
    'any command script, pipelined and cut anywhere: proper replies, a proper end, no internal error',
    async () => {
      await fc.assert(
        fc.asyncProperty(
          commandScript(s.cred),
          fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 4 }),
          async (script, cuts) => {
            const session = await runSession(s.smtp.port, script, cuts);
            checkSession(session, JSON.stringify(script.toString('latin1')));
          },
        ),
        fuzzParams(40),
      );
      await wellBehavedClientSends();
    },
    FUZZ_TIMEOUT_MS,
  );

  it('a fuzzing session open beside a well-behaved client does not disturb it', async () => {
    const noisy = fc.sample(commandScript(s.cred), {
      numRuns: 5,
      ...(process.env.FUZZ_SEED ? { seed: Number(process.env.FUZZ_SEED) } : {}),
    });
    const sessions = noisy.map((script) => runSession(s.smtp.port, script, [0.3, 0.6]));
    await wellBehavedClientSends();
    for (const [i, session] of (await Promise.all(sessions)).entries()) {
      checkSession(session, JSON.stringify(noisy[i]?.toString('latin1')));
    }
  });
});
