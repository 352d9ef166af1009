/**
 * SMTP fuzzing of message data against the real submission server: binary bytes, bare LF and
 * CR, NUL, huge and numerous headers, missing headers (From too), broken MIME and encoded
 * words, X-Postyard-Options near-valid and junk, unstuffed dots, pipelined commands after the
 * data. Each message is answered with a proper code (queued, or refused as documented), never
 * with the catch-all of an internal error; what was accepted is really stored; a well-behaved
 * client sends fine afterwards.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mailer, type SmtpSetup, setupSmtp, transmissionRows } from '../smtp/helpers.ts';
import { FUZZ_TIMEOUT_MS, fuzzParams } from './harness.ts';
import { checkSession, commandLine, messageData, runSession } from './smtp-fuzz.ts';

let s: SmtpSetup;
beforeAll(async () => {
  s = await setupSmtp({ POSTYARD_SMTP_ALLOW_INSECURE_AUTH: 'true', POSTYARD_SMTP_IDLE_TIMEOUT_SECONDS: '10' });
});
afterAll(async () => {
  await s?.close();
});

/** What the end of DATA may be answered with (docs/smtp.md, "Reply codes"). */
const END_OF_DATA =
  /^(250 2\.0\.0 Ok: queued as [0-9a-f-]{36}|550 5\.6\.0 |554 5\.6\.0 |554 5\.6\.7 |550 5\.7\.1 |553 5\.1\.7 |552 5\.3\.4 |451 4\.7\.1 )/;

describe('SMTP message data fuzzing', () => {
  it(
    'any message data: a proper answer at the end of DATA, accepted messages stored',
    async () => {
      const auth = `AUTH PLAIN ${Buffer.from(`\0${s.cred.username}\0${s.cred.password}`).toString('base64')}`;
      const head = Buffer.from(`EHLO client.test\r\n${auth}\r\n`);
      const transaction = Buffer.from('MAIL FROM:<shop@example.com>\r\nRCPT TO:<ann@example.com>\r\nDATA\r\n');
      // Transmission ids named by 250 answers (a replayed idempotency_key names an earlier one).
      const queued = new Set<string>();
      // A message: data, dot-stuffed as a client must (or not: a lone "." then ends it early), the
      // end of data, and perhaps some commands pipelined after it.
      const message = fc
        .tuple(messageData, fc.boolean(), fc.array(commandLine(s.cred), { maxLength: 2 }))
        .map(([data, stuff, after]) =>
          Buffer.concat([
            transaction,
            stuff ? Buffer.from(data.toString('latin1').replace(/(^|\r\n)\./g, '$1..'), 'latin1') : data,
            Buffer.from(`\r\n.\r\n${after.map((l) => `${l}\r\n`).join('')}`, 'utf8'),
          ]),
        );
      await fc.assert(
        // Several messages per session: one AUTH (an scrypt verification) serves them all.
        fc.asyncProperty(
          fc.array(message, { minLength: 1, maxLength: 3 }),
          fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 3 }),
          async (messages, cuts) => {
            const script = Buffer.concat([head, ...messages]);
            const session = await runSession(s.smtp.port, script, cuts);
            const what = JSON.stringify(script.toString('latin1'));
            checkSession(session, what);
            let answers = 0;
            session.lines.forEach((line, i) => {
              if (!line.startsWith('354 ')) return;
              const answer = session.lines[i + 1] ?? '';
              if (!END_OF_DATA.test(answer)) throw new Error(`end of DATA answered ${answer}\n${what.slice(0, 600)}`);
              answers++;
              if (answer.startsWith('250 ')) queued.add(answer.slice(-36));
            });
            if (answers === 0)
              throw new Error(`DATA never reached: ${session.lines.join(' | ')}\n${what.slice(0, 400)}`);
          },
        ),
        fuzzParams(20),
      );
      // Accepted means stored: exactly the transmissions the 250 answers named (nothing else sends).
      expect(queued.size).toBeGreaterThan(0);
      const rows = await transmissionRows(s.ctx, s.tenant.tenantId);
      expect(rows.map((r) => r.id).sort()).toEqual([...queued].sort());
      const t = mailer(s.smtp.port, s.cred);
      try {
        const info = await t.sendMail({ from: 'shop@example.com', to: 'ann@example.com', subject: 'after', text: 'x' });
        expect(info.response).toMatch(/^250 2\.0\.0 Ok: queued as /);
      } finally {
        t.close();
      }
    },
    FUZZ_TIMEOUT_MS,
  );
});
