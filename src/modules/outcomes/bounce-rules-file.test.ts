import { describe, expect, it } from 'vitest';
import { BOUNCE_RULES, classifyBounce, parseBounceRules } from './bounce-rules.ts';

/** The bounce rules as a data file (config/bounce-rules.yaml, POSTYARD_BOUNCE_RULES_FILE). */
describe('bounce rules file', () => {
  it('the shipped file holds the table, first rule 5.1.1, last the reply-code fallbacks', () => {
    expect(BOUNCE_RULES[0]).toMatchObject({ id: 'bad-mailbox', match: { enhanced: '5.1.1' }, suppress: true });
    expect(BOUNCE_RULES.at(-1)).toMatchObject({ id: 'permanent', match: { code: [500, 599] } });
  });

  it("an operator's table classifies by its own rules", () => {
    const rules = parseBounceRules(
      `rules:
  - id: provider-quirk
    code: [500, 599]
    text: 'mailbox unavailable \\(QX1\\)'
    bounce_type: hard
    category: bad_mailbox
    suppress: true
  - id: permanent
    code: [500, 599]
    bounce_type: hard
    category: other
    suppress: false
`,
      'operator.yaml',
    );
    expect(classifyBounce({ code: 550, text: 'Mailbox unavailable (QX1)' }, rules)).toMatchObject({
      rule: 'provider-quirk',
      suppress: true,
    });
    expect(classifyBounce({ code: 550, text: 'no' }, rules).rule).toBe('permanent');
  });

  it('refuses files that break the rules, naming the entry', () => {
    const base = 'bounce_type: hard\n    category: other\n    suppress: false';
    const bad: [string, RegExp][] = [
      ['rules: []', /non-empty "rules"/],
      [`rules:\n  - id: a\n    enhanced: '5.x'\n    ${base}`, /rules\[0\]\.enhanced/],
      [`rules:\n  - id: a\n    text: '('\n    ${base}`, /rules\[0\]\.text/],
      [`rules:\n  - id: a\n    code: [599, 500]\n    ${base}`, /rules\[0\]\.code/],
      [`rules:\n  - id: a\n    bounce_type: hard\n    category: nope\n    suppress: false`, /category/],
      [`rules:\n  - id: a\n    colour: red\n    ${base}`, /unknown field "colour"/],
    ];
    for (const [text, message] of bad) expect(() => parseBounceRules(text, 't'), text).toThrow(message);
  });
});
