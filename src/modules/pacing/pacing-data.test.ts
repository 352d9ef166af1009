import { describe, expect, it } from 'vitest';
import { siteFor } from '../delivery/shaping.ts';
import { loadPacingData, PacingDataError, parsePacingData } from './pacing-data.ts';

const SITE =
  'max_connections: 2\n    messages_per_connection: 10\n    messages_per_minute: 60\n    messages_per_hour: 600';
const file = (sites: string, rules = '') => `sites:\n${sites}\n${rules}`;
const ok = file(`  big:\n    mx: [.big.example]\n    ${SITE}\n  default:\n    ${SITE}`);

describe('pacing data file', () => {
  it('the shipped file loads: gmail, outlook, yahoo, apple, default (last), and the three rules', () => {
    const d = loadPacingData(null);
    expect(d.sites.map((s) => s.name)).toEqual(['gmail', 'outlook', 'yahoo', 'apple', 'default']);
    expect(d.rules.map((r) => r.id)).toEqual(['yahoo-tss04', 'microsoft-s3150', 'gmail-4.7.28']);
    expect(d.rules[0]?.match.test('421 4.7.0 [TSS04] Messages from 192.0.2.1 temporarily deferred')).toBe(true);
    expect(d.rules[1]?.match.test("550 5.7.1 Unfortunately, messages from [192.0.2.1] weren't sent. (S3150)")).toBe(
      true,
    );
    expect(d.rules[2]?.match.test('421-4.7.28 Gmail has detected an unusual rate of mail')).toBe(true);
  });

  it('sites come from MX host names; unknown hosts take default limits, counted by their last two labels', () => {
    expect(siteFor('gmail-smtp-in.l.google.com.')).toMatchObject({ site: 'gmail', profile: 'gmail' });
    expect(siteFor('ALT1.ASPMX.L.GOOGLE.COM')).toMatchObject({ site: 'gmail' });
    expect(siteFor('example-com.mail.protection.outlook.com')).toMatchObject({ site: 'outlook' });
    expect(siteFor('mta5.am0.yahoodns.net')).toMatchObject({ site: 'yahoo' });
    expect(siteFor('mx01.mail.icloud.com')).toMatchObject({ site: 'apple' });
    const other = siteFor('mx2.example.net');
    expect(other).toMatchObject({ site: 'example.net', profile: 'default' });
    expect(other.limits.messagesPerMinute).toBeGreaterThan(0);
    const d = parsePacingData(ok, 't');
    expect(siteFor('a.big.example', d)).toMatchObject({ site: 'big', limits: { maxConnections: 2 } });
    // A suffix matches whole labels only.
    expect(siteFor('notbig.example', d).profile).toBe('default');
  });

  it('refuses files that break the rules, naming the entry', () => {
    const bad: [string, RegExp][] = [
      ['sites: [1, 2]', /"sites" mapping/],
      [file(`  big:\n    mx: [.big.example]\n    ${SITE}`), /sites.default is required/],
      [file(`  default:\n    ${SITE}\n    extra: 1`), /unknown field "extra"/],
      [file(`  default:\n    ${SITE.replace('60\n', '0\n')}`), /messages_per_minute: a whole number/],
      [file(`  big:\n    ${SITE}\n  default:\n    ${SITE}`), /sites.big.mx: at least one/],
      [file(`  Big:\n    mx: [.b]\n    ${SITE}\n  default:\n    ${SITE}`), /site names/],
      [ok + 'rules:\n  - id: r\n    match: "("\n    action: suspend\n    duration_seconds: 5\n', /rules\[0\]\.match/],
      [ok + 'rules:\n  - id: r\n    match: x\n    action: pause\n    duration_seconds: 5\n', /action: suspend or slow/],
      [ok + 'rules:\n  - id: r\n    match: x\n    action: slow\n    duration_seconds: 5\n', /factor/],
      [
        ok + 'rules:\n  - id: r\n    match: x\n    action: suspend\n    sites: [nope]\n    duration_seconds: 5\n',
        /sites: names/,
      ],
      [ok + 'rules:\n  - id: r\n    match: x\n    action: suspend\n', /duration_seconds/],
      ['sites: {a: 1}\nsites: {b: 2}', /not valid YAML/],
    ];
    for (const [text, message] of bad) {
      expect(() => parsePacingData(text, 't'), text).toThrow(PacingDataError);
      expect(() => parsePacingData(text, 't'), text).toThrow(message);
    }
  });
});
